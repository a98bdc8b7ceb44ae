import Foundation
import ListrKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real `listrd` on its SQLite store, and the real `listrctl` dialling it with `--connect`
/// (no avahi-daemon needed): migration of a JSON store, stores refused at start-up, live
/// settings and paging. When the tests run as root, both run as nobody (see ``TestProcess``).
@Suite("listrd's store and settings, end to end")
struct ListrStoreEndToEndTests {
    /// A JSON store as an earlier listrd wrote it.
    private func legacyStore(_ items: [(id: String, title: String, done: Bool)]) -> Data {
        let entries = items.map { #"{"done":\#($0.done),"id":"\#($0.id)","title":"\#($0.title)"}"# }
        return Data(#"{"format":"listr-store","items":[\#(entries.joined(separator: ","))],"version":1}"#.utf8)
    }

    private let milk = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    private let bread = "0E984725-C51C-4BF4-9960-E1C80E27ABA0"

    @Test("a JSON store is migrated on first start, kept as a backup, and nothing temporary is left")
    func migratesJSONInPlace() async throws {
        let world = try ListrFixture()
        let json = legacyStore([(milk, "Milk", false), (bread, "Brown bread", true)])
        let path = try world.write(json, to: "store.json")
        let (_, port) = try await world.startDaemon(store: path)
        let list = try await world.ctl("item", "list", "--connect", "127.0.0.1:\(port)")
        #expect(list.stdout == "[ ] Milk\n[✓] Brown bread\n", "\(list)")
        let dump = try await world.ctl("store", "dump", "-", "--connect", "127.0.0.1:\(port)")
        #expect(try ItemPropertyList.decode(Data(dump.stdout.utf8)).map(\.id.uuidString) == [milk, bread])

        #expect(try Data(contentsOf: URL(fileURLWithPath: path + ".backup")) == json)
        let header = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16)
        #expect(header == Data("SQLite format 3\0".utf8), "the store was not replaced by a database")
        let names = try FileManager.default.contentsOfDirectory(atPath: world.folder)
        #expect(!names.contains { $0.hasPrefix(".") }, "temporary files left: \(names)")
    }

    @Test("store.json beside a new store.sqlite is migrated into it")
    func migratesSiblingJSON() async throws {
        let world = try ListrFixture()
        try world.write(legacyStore([(milk, "Milk", true)]), to: "store.json")
        let (daemon, port) = try await world.startDaemon()
        #expect(daemon.stderr.contains("migrated the JSON store \(world.path("store.json")) (1 items)"), "\(daemon.stderr)")
        let list = try await world.ctl("item", "list", "--connect", "127.0.0.1:\(port)")
        #expect(list.stdout == "[✓] Milk\n", "\(list)")
        #expect(!FileManager.default.fileExists(atPath: world.path("store.json")))
        #expect(FileManager.default.fileExists(atPath: world.path("store.json.backup")))
    }

    @Test("a JSON store with two items of one id is refused at migration, untouched, with a sentence")
    func refusesDuplicateIDs() async throws {
        let world = try ListrFixture()
        let json = legacyStore([(milk, "Milk", false), (milk, "Milk again", false)])
        let path = try world.write(json, to: "store.json")
        let result = try await world.runDaemonToExit(store: path)
        #expect(result.exit == .status(70), "\(result)")
        #expect(result.stderr.contains("The JSON store \(path) could not be moved into the database: items 1 and 2 have the same id \(milk). Nothing was changed"), "\(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == json)
        let names = try FileManager.default.contentsOfDirectory(atPath: world.folder).filter { $0 != "store.json.lock" }
        #expect(names == ["store.json"], "\(names)")
    }

    @Test("a file that is not a Listr database is refused and never touched", arguments: [
        ("text", Data("my notes\n".utf8), "it is neither a Listr database nor a JSON store"),
        ("empty", Data(), "it is empty"),
        ("another SQLite database", Data("SQLite format 3\0".utf8) + Data(repeating: 0, count: 4080), "it is an SQLite database of another application"),
        ("another JSON document", Data(#"{"format":"other","version":1,"items":[]}"#.utf8), #"its format is "other", not "listr-store""#),
    ])
    func refusesForeignFiles(_ kind: String, _ contents: Data, _ reason: String) async throws {
        let world = try ListrFixture()
        let path = try world.write(contents, to: "store.sqlite")
        let result = try await world.runDaemonToExit(store: path)
        #expect(result.exit == .status(70), "\(kind): \(result)")
        #expect(result.stderr.contains("The file \(path) is not a Listr store (\(reason)"), "\(kind): \(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == contents, "\(kind) was changed")
        let names = try FileManager.default.contentsOfDirectory(atPath: world.folder).filter { $0 != "store.sqlite.lock" }
        #expect(names == ["store.sqlite"], "\(kind): \(names)")
    }

    @Test("a read-only store, or a store in a read-only folder, is refused with a sentence and left as it was")
    func refusesReadOnlyStore() async throws {
        let world = try ListrFixture()
        let (first, port) = try await world.startDaemon()
        _ = try await world.ctl("item", "add", "Milk", "--connect", "127.0.0.1:\(port)")
        _ = try await world.stop(first)
        let store = world.path("store.sqlite")
        let before = try Data(contentsOf: URL(fileURLWithPath: store))

        #expect(chmod(store, 0o444) == 0)
        let readOnlyFile = try await world.runDaemonToExit(store: store)
        #expect(readOnlyFile.exit == .status(70), "\(readOnlyFile)")
        #expect(readOnlyFile.stderr.contains("The store \(store) cannot be written: this user"), "\(readOnlyFile)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store)) == before)
        #expect(chmod(store, 0o644) == 0)

        #expect(chmod(world.folder, 0o555) == 0)
        defer { chmod(world.folder, 0o755) }
        let readOnlyFolder = try await world.runDaemonToExit(store: store)
        #expect(readOnlyFolder.exit == .status(70), "\(readOnlyFolder)")
        #expect(readOnlyFolder.stderr.contains("may not create files in its folder \(world.folder)"), "\(readOnlyFolder)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store)) == before)
    }

    @Test("temporary files left by a run killed during a save are removed at start")
    func removesLeftovers() async throws {
        let world = try ListrFixture()
        try world.write(Data("half a store".utf8), to: ".store.sqlite.new-0A1B2C3D")
        try world.write(Data("half a journal".utf8), to: ".store.sqlite.new-0A1B2C3D-journal")
        try world.write(Data("{".utf8), to: ".store.json.6F9619FF-8B86-D011-B42D-00C04FC964FF.tmp")
        try world.write(Data("keep me".utf8), to: ".store.sqlite.notes")
        let (daemon, _) = try await world.startDaemon()
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: world.folder))
        #expect(names.isDisjoint(with: [".store.sqlite.new-0A1B2C3D", ".store.sqlite.new-0A1B2C3D-journal", ".store.json.6F9619FF-8B86-D011-B42D-00C04FC964FF.tmp"]), "\(names)")
        #expect(names.contains(".store.sqlite.notes"), "a file that is not ours was removed")
        #expect(daemon.stderr.contains("removed \(world.path(".store.sqlite.new-0A1B2C3D"))"), "\(daemon.stderr)")
    }

    @Test("config get, set and reset apply at once, refuse wrong keys and values, and persist with the store")
    func liveSettings() async throws {
        let world = try ListrFixture()
        let (first, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]

        var result = try await world.ctl(["config", "get"] + at)
        #expect(result.stdout == "log-level: info\nname: Listr test\nitem-limit: 1000000\n", "\(result)")

        result = try await world.ctl(["config", "set", "item-limit", "2"] + at)
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "Set item-limit to \"2\".\n", "\(result)")
        for title in ["Milk", "Bread"] { _ = try await world.ctl(["item", "add", title] + at) }
        result = try await world.ctl(["item", "add", "Eggs"] + at)
        #expect(result.exit == .status(1), "\(result)")
        #expect(result.stderr.contains("The list would have 3 items and the item limit is 2."), "\(result)")

        for (key, value, sentence) in [
            ("colour", "red", #"There is no setting "colour"; the settings are log-level, name, item-limit. Nothing was changed."#),
            ("item-limit", "many", #"The setting item-limit cannot be "many": it is not a whole number. Nothing was changed."#),
            ("item-limit", "1", "the list holds 2 items already"),
            ("log-level", "loud", "the levels are trace, debug, info"),
        ] {
            result = try await world.ctl(["config", "set", key, value] + at)
            #expect(result.exit == .status(1), "\(key) \(value): \(result)")
            #expect(result.stderr.contains(sentence), "\(key) \(value): \(result)")
        }
        result = try await world.ctl(["config", "get", "item-limit"] + at)
        #expect(result.stdout == "2\n", "\(result)")

        // The log level applies at once: listrd's debug lines appear without a restart.
        #expect(!first.stderr.contains(" debug "))
        _ = try await world.ctl(["config", "set", "log-level", "debug"] + at)
        _ = try await world.ctl(["item", "list"] + at)
        try await first.waitFor("a debug line", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains(" debug listrd: [ListrKit] ListItemsCommand from ")
        }

        // The settings persist with the store (no --name: the saved one is used).
        _ = try await world.ctl(["config", "set", "name", "Pantry"] + at)
        try await first.waitFor("serving under its new name", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("serving \"Pantry\"")
        }
        _ = try await world.stop(first)
        let (second, again) = try await world.startDaemon(name: nil, readyName: "Pantry", extra: ["--port", "\(port)"])
        #expect(again == port)
        result = try await world.ctl(["config", "get", "--json"] + at)
        let settings = try JSONDecoder().decode(ListrSettings.self, from: Data(result.stdout.utf8))
        #expect(settings == ListrSettings(logLevel: .debug, name: "Pantry", itemLimit: 2), "\(result)")

        result = try await world.ctl(["config", "reset"] + at)
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout.hasPrefix("Reset the settings to their defaults: log-level \"info\""), "\(result)")
        // The reset renames listrd back to its default name, which restarts its transceiver 300 ms
        // later (ListrService.renameGrace): ask once it serves under that name, not on the
        // connection the restart closes (as after the rename to Pantry above).
        try await second.waitFor("serving under its default name", timeout: ListrFixture.deadline) { _, stderr in
            stderr.components(separatedBy: "serving \"").count - 1 >= 2
        }
        result = try await world.ctl(["config", "get", "item-limit"] + at)
        #expect(result.stdout == "1000000\n", "\(result)")
    }

    @Test("listrd killed with SIGKILL during a replace comes back with the old list or the new one, whole")
    func sigkillDuringReplace() async throws {
        let world = try ListrFixture()
        let (first, port) = try await world.startDaemon(extra: ["--log-level", "debug"])
        let at = ["--connect", "127.0.0.1:\(port)"]
        _ = try await world.ctl(["item", "add", "Before"] + at)
        let items = (1...20_000).map { Item(title: "Replacement \($0)") }
        let plist = try world.write(try ItemPropertyList.encode(items), to: "big.plist")

        let replace = try world.launchCtl(["store", "replace", plist] + at)
        try await first.waitFor("the replace to arrive", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("ReplaceDatabaseCommand from")
        }
        first.send(SIGKILL)
        #expect(try await first.waitForExit(timeout: ListrFixture.deadline).exit == .signal(SIGKILL))
        let killedAt = ContinuousClock.now
        let result = try await replace.waitForExit(timeout: ListrFixture.deadline)
        let waited = ContinuousClock.now - killedAt

        _ = try await world.startDaemon(extra: ["--port", "\(port)"])
        let dump = try await world.ctl(["store", "dump", "-"] + at)
        let after = try ItemPropertyList.decode(Data(dump.stdout.utf8))
        switch result.exit {
        case .status(0):
            // listrd answered before the signal landed (the log line comes as it starts the
            // replace; on a loaded machine it can finish before the test sends the kill): what it
            // said it did, it did.
            #expect(after == items, "listrctl said the replace was done; \(after.count) items after the restart")
        default:
            // listrctl's first redial finds nothing listening at listrd's port, so it does not wait
            // for its 20 s timeout: it says at once that listrd stopped, and that it may or may not
            // have applied the replace.
            #expect(result.exit == .status(69), "\(result)")
            #expect(result.stderr.contains("listrd stopped before it answered: its connection closed without a goodbye, and nothing listens at its address any more (connecting to 127.0.0.1:\(port) failed:"), "\(result)")
            #expect(result.stderr.contains("Connection refused"), "\(result)")
            #expect(waited < .seconds(15), "listrctl waited \(waited) after listrd was killed (its timeout is 20 s)")
            #expect(after.map(\.title) == ["Before"] || after == items, "\(after.count) items after the restart")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: world.folder)
        #expect(!names.contains { $0.hasPrefix(".") }, "temporary files left: \(names)")
    }

    @Test("a store over the 16 MiB message limit is replaced and dumped as resources, with nothing extra printed when piped")
    func largeStoreAsResources() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        // About 20 MiB of property list: more than one 16 MiB message could carry.
        let title = String(repeating: "x", count: 900)
        let items = (1...20_000).map { Item(title: "\($0) \(title)") }
        let data = try ItemPropertyList.encode(items)
        #expect(data.count > ListrLimits.maximumMessageLength)
        let plist = try world.write(data, to: "big.plist")

        let replaced = try await world.ctl(["store", "replace", plist] + at)
        #expect(replaced.exit == .status(0), "\(replaced)")
        #expect(replaced.stdout == "Replaced the list with 20000 items.\n", "\(replaced)")
        #expect(replaced.stderr.isEmpty, "\(replaced)")

        let file = world.path("out.plist")
        let dumped = try await world.ctl(["store", "dump", file] + at)
        #expect(dumped.exit == .status(0), "\(dumped)")
        #expect(dumped.stderr.isEmpty, "\(dumped)")
        let written = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(dumped.stdout == "Wrote the list (\(written.count) bytes) to \(file).\n", "\(dumped)")
        #expect(try ItemPropertyList.decode(written) == items)

        let piped = try await world.ctl(["store", "dump", "-"] + at)
        #expect(Data(piped.stdout.utf8) == written)
        #expect(piped.stderr.isEmpty, "\(piped.stderr.prefix(200))")
        let names = try FileManager.default.contentsOfDirectory(atPath: world.folder)
        #expect(!names.contains { $0.hasPrefix(".") }, "temporary files left: \(names)")
    }

    @Test("item list pages with --limit and --offset, in text and JSON")
    func paging() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        for title in ["a", "b", "c", "d"] { _ = try await world.ctl(["item", "add", title] + at) }
        var result = try await world.ctl(["item", "list", "--limit", "2", "--offset", "1"] + at)
        #expect(result.stdout == "[ ] b\n[ ] c\n", "\(result)")
        result = try await world.ctl(["item", "list", "--offset", "3", "--json"] + at)
        let listed = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: [[String: Any]]]
        #expect(listed?["items"]?.map { $0["index"] as? Int } == [4], "\(result)")
        #expect(listed?["items"]?.map { $0["title"] as? String } == ["d"], "\(result)")
        result = try await world.ctl(["item", "list", "--offset", "9"] + at)
        #expect(result.stdout == "There are no items from position 10 on: the list has 4 items.\n", "\(result)")
        result = try await world.ctl(["item", "list", "--limit", "0"] + at)
        #expect(result.exit == .status(64), "\(result)")
    }
}
