import Foundation
import ListrKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real `listrd` driven by the real `listrctl`, discovering each other through the real
/// (loopback-only) avahi-daemon. Each scenario has its own service type and store.
@Suite("listrd and listrctl end to end")
struct ListrEndToEndTests {
    init() async throws {
        try await ListrFixture.requireAvahi()
    }

    @Test("every item command works and says what it did")
    func itemCommands() async throws {
        let world = try ListrFixture()
        _ = try await world.startDaemon()

        var result = try await world.ctl("item", "list")
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "The list is empty.\n")

        result = try await world.ctl("item", "add", "Milk")
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "Added \"Milk\" as item 1.\n")
        result = try await world.ctl("item", "add", "Brown", "bread")
        #expect(result.stdout == "Added \"Brown bread\" as item 2.\n", "\(result)")
        _ = try await world.ctl("item", "add", "Eggs")

        result = try await world.ctl("item", "done", "2")
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "Marked item 2, \"Brown bread\", as done.\n")
        result = try await world.ctl("item", "list")
        #expect(result.stdout == "[ ] Milk\n[✓] Brown bread\n[ ] Eggs\n", "\(result)")

        result = try await world.ctl("item", "remove", "1")
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "Removed item 1, \"Milk\".\n")

        result = try await world.ctl("item", "add", "Eggs", "--json")
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "{\"message\":\"Added \\\"Eggs\\\" as item 3.\"}\n")
        _ = try await world.ctl("item", "remove", "3")

        result = try await world.ctl("item", "list", "--json")
        #expect(result.exit == .status(0), "\(result)")
        let listed = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: [[String: Any]]]
        let items = try #require(listed?["items"], "\(result)")
        #expect(items.map { $0["title"] as? String } == ["Brown bread", "Eggs"])
        #expect(items.map { $0["index"] as? Int } == [1, 2])
        #expect(items.map { $0["done"] as? Bool } == [true, false])
    }

    @Test("a position out of range is refused on stderr with a non-zero exit, and changes nothing")
    func outOfRange() async throws {
        let world = try ListrFixture()
        _ = try await world.startDaemon()
        _ = try await world.ctl("item", "add", "Milk")

        for command in ["done", "remove"] {
            let result = try await world.ctl("item", command, "5")
            #expect(result.exit == .status(1), "\(result)")
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.contains("There is no item 5: the list has 1 item"), "\(result)")
        }
        let json = try await world.ctl("item", "done", "0", "--json")
        #expect(json.exit == .status(1))
        #expect(json.stderr.hasPrefix("{\"error\":\"There is no item 0"), "\(json)")
        let list = try await world.ctl("item", "list")
        #expect(list.stdout == "[ ] Milk\n", "\(list)")
    }

    @Test("dump writes an XML property list, and replace brings the dumped list back")
    func dumpReplaceRoundTrip() async throws {
        let world = try ListrFixture()
        _ = try await world.startDaemon()
        _ = try await world.ctl("item", "add", "Milk")
        _ = try await world.ctl("item", "add", "Bread")
        _ = try await world.ctl("item", "done", "1")

        let dump = world.path("dump.plist")
        let dumped = try await world.ctl("store", "dump", dump)
        #expect(dumped.exit == .status(0), "\(dumped)")
        let data = try Data(contentsOf: URL(fileURLWithPath: dump))
        let toStdout = try await world.ctl("store", "dump", "-")
        #expect(toStdout.exit == .status(0), "\(toStdout)")
        #expect(Data(toStdout.stdout.utf8) == data)
        #expect(String(decoding: data, as: UTF8.self).hasPrefix("<?xml"))
        var format = PropertyListSerialization.PropertyListFormat.binary
        let root = try PropertyListSerialization.propertyList(from: data, options: [], format: &format) as? [[String: Any]]
        #expect(format == .xml)
        #expect(root?.map { $0["title"] as? String } == ["Milk", "Bread"])
        #expect(root?.map { $0["done"] as? Bool } == [true, false])
        #expect(root?.allSatisfy { UUID(uuidString: $0["id"] as? String ?? "") != nil } == true)

        _ = try await world.ctl("item", "remove", "1")
        _ = try await world.ctl("item", "add", "Eggs")
        let replaced = try await world.ctl("store", "replace", dump)
        #expect(replaced.exit == .status(0), "\(replaced)")
        #expect(replaced.stdout == "Replaced the list with 2 items.\n")
        let list = try await world.ctl("item", "list")
        #expect(list.stdout == "[✓] Milk\n[ ] Bread\n", "\(list)")

        let again = world.path("again.plist")
        _ = try await world.ctl("store", "dump", again)
        #expect(try ItemPropertyList.decode(Data(contentsOf: URL(fileURLWithPath: again))) == ItemPropertyList.decode(data))
    }

    @Test("a malformed replace is refused and leaves the store intact, before and after a restart")
    func malformedReplace() async throws {
        let world = try ListrFixture()
        let (first, _) = try await world.startDaemon()
        _ = try await world.ctl("item", "add", "Milk")
        let before = try await world.ctl("store", "dump", "-")

        let bad = try world.write(Data("<plist version=\"1.0\"><dict><key>title</key><string>x</string></dict></plist>".utf8), to: "bad.plist")
        let result = try await world.ctl("store", "replace", bad)
        #expect(result.exit == .status(1), "\(result)")
        #expect(result.stderr.contains("The data is not a Listr property list: the root is not an array"), "\(result)")

        let missing = try await world.ctl("store", "replace", world.path("missing.plist"))
        #expect(missing.exit == .status(66), "\(missing)")
        #expect(missing.stderr.contains("missing.plist cannot be read"), "\(missing)")

        let list = try await world.ctl("item", "list")
        #expect(list.stdout == "[ ] Milk\n", "\(list)")
        _ = try await world.stop(first)
        _ = try await world.startDaemon()
        let after = try await world.ctl("store", "dump", "-")
        #expect(after.stdout == before.stdout, "\(after)")
    }

    @Test("the store survives a graceful restart, and SIGTERM ends listrd with status 0")
    func survivesRestart() async throws {
        let world = try ListrFixture()
        let (first, _) = try await world.startDaemon()
        _ = try await world.ctl("item", "add", "Milk")
        _ = try await world.ctl("item", "add", "Bread")
        _ = try await world.ctl("item", "done", "2")
        let stopped = try await world.stop(first)
        #expect(stopped.exit == .status(0), "\(stopped)")

        _ = try await world.startDaemon()
        let list = try await world.ctl("item", "list")
        #expect(list.stdout == "[ ] Milk\n[✓] Bread\n", "\(list)")
    }

    @Test("an add acknowledged just before listrd is killed with SIGKILL is there after a restart")
    func survivesSigkill() async throws {
        let world = try ListrFixture()
        let (first, _) = try await world.startDaemon()
        let added = try await world.ctl("item", "add", "Acknowledged")
        #expect(added.exit == .status(0), "\(added)")
        first.send(SIGKILL)
        let killed = try await first.waitForExit(timeout: ListrFixture.deadline)
        #expect(killed.exit == .signal(SIGKILL))

        _ = try await world.startDaemon()
        let list = try await world.ctl("item", "list")
        #expect(list.stdout == "[ ] Acknowledged\n", "\(list)")
    }

    @Test("config set name re-advertises listrd under the new name, and watch --peer follows it")
    func renameFollowedByWatch() async throws {
        let world = try ListrFixture()
        let (daemon, _) = try await world.startDaemon(name: "Kitchen")
        let watcher = try world.launchCtl(["watch", "--peer", "Kitchen"])
        try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains("The list is empty.")
        }
        let renamed = try await world.ctl("config", "set", "name", "Pantry", "--peer", "Kitchen")
        #expect(renamed.exit == .status(0), "\(renamed)")
        try await daemon.waitFor("serving under the new name", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("serving \"Pantry\"")
        }
        try await watcher.waitFor("the reconnection", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains("Reconnected to \"Pantry\".")
        }
        let added = try await world.ctl("item", "add", "Jam", "--peer", "Pantry")
        #expect(added.exit == .status(0), "\(added)")
        try await watcher.waitFor("the add", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains("added \"Jam\" as item 1.")
        }
        watcher.send(SIGINT)
        #expect(try await watcher.waitForExit(timeout: ListrFixture.deadline).exit == .status(0))
    }

    @Test("10 listrctl processes adding at once lose nothing")
    func concurrentAdds() async throws {
        let world = try ListrFixture()
        _ = try await world.startDaemon()
        let processes = try (1...10).map { try world.launchCtl(["item", "add", "item \($0)"]) }
        for process in processes {
            let result = try await process.waitForExit(timeout: ListrFixture.deadline)
            #expect(result.exit == .status(0), "\(process.name): \(result)")
        }
        let list = try await world.ctl("item", "list")
        let lines = list.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 10, "\(list)")
        #expect(Set(lines) == Set((1...10).map { "[ ] item \($0)" }))
    }

    @Test("with no daemon, listrctl fails within its timeout with a sentence naming the service type")
    func noDaemon() async throws {
        let world = try ListrFixture()
        let started = ContinuousClock.now
        let result = try await world.ctl(["item", "list"], timeout: "2")
        let elapsed = ContinuousClock.now - started
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("No listrd of service type \"\(world.serviceType)\" was found within 2 s."), "\(result)")
        #expect(result.stderr.contains("listrd is running") && result.stderr.contains("avahi-daemon is running"))
        #expect(elapsed < .seconds(2 + 15), "listrctl took \(elapsed) with --timeout 2")
    }

    @Test("with two daemons, --peer selects one, and without it listrctl lists both and fails")
    func twoDaemons() async throws {
        let world = try ListrFixture()
        _ = try await world.startDaemon(name: "Kitchen", store: world.path("kitchen.sqlite"))
        _ = try await world.startDaemon(name: "Garage", store: world.path("garage.sqlite"))

        let added = try await world.ctl("item", "add", "Milk", "--peer", "Kitchen")
        #expect(added.exit == .status(0), "\(added)")
        let kitchen = try await world.ctl("item", "list", "--peer", "Kitchen")
        #expect(kitchen.stdout == "[ ] Milk\n", "\(kitchen)")
        let garage = try await world.ctl("item", "list", "--peer", "Garage")
        #expect(garage.stdout == "The list is empty.\n", "\(garage)")

        let ambiguous = try await world.ctl("item", "list")
        #expect(ambiguous.exit == .status(69), "\(ambiguous)")
        #expect(ambiguous.stderr.contains("Several listrd of service type \"\(world.serviceType)\" are running: \"Garage\", \"Kitchen\". Choose one with --peer NAME."), "\(ambiguous)")

        let unknown = try await world.ctl(["item", "list", "--peer", "Attic"], timeout: "2")
        #expect(unknown.exit == .status(69), "\(unknown)")
        #expect(unknown.stderr.contains("No listrd named \"Attic\""), "\(unknown)")
        #expect(unknown.stderr.contains("\"Garage\", \"Kitchen\""), "\(unknown)")
    }
}
