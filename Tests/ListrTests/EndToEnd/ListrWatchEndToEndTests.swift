import Foundation
import GRDB
import ListrKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `listrctl watch` against the real `listrd`, dialled with `--connect`: it sees another
/// client's change, survives a restart of listrd, and ends with status 0 on Ctrl-C.
@Suite("listrctl watch, end to end")
struct ListrWatchEndToEndTests {
    @Test("watch --json prints another client's add, survives a listrd restart, and exits 0 on SIGINT")
    func watchSurvivesRestart() async throws {
        let world = try ListrFixture()
        let (first, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        _ = try await world.ctl(["item", "add", "Milk"] + at)

        let watcher = try world.launchCtl(["watch", "--json"] + at)
        try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""event":"list""#)
        }
        let added = try await world.ctl(["item", "add", "Bread"] + at)
        #expect(added.exit == .status(0), "\(added)")
        try await watcher.waitFor("the add", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""event":"added""#) && stdout.contains(#""title":"Bread""#)
        }
        let lines = watcher.stdout.split(separator: "\n").map(String.init)
        let objects = try lines.map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)") }
        #expect(objects.first?["event"] as? String == "list")
        #expect((objects.first?["items"] as? [[String: Any]])?.map { $0["title"] as? String } == ["Milk"])
        let change = try #require(objects.last)
        #expect(change["index"] as? Int == 2)
        #expect((change["client"] as? String)?.hasPrefix("listrctl ") == true, "\(change)")

        _ = try await world.stop(first)
        try await watcher.waitFor("the disconnection", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""event":"disconnected""#)
        }
        _ = try await world.startDaemon(extra: ["--port", "\(port)"])
        try await watcher.waitFor("the list again", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""reconnected":true"#)
        }
        let reconnected = try #require(watcher.stdout.split(separator: "\n").last { $0.contains(#""reconnected":true"#) })
        #expect(reconnected.contains(#""title":"Milk""#) && reconnected.contains(#""title":"Bread""#), "\(reconnected)")
        _ = try await world.ctl(["item", "done", "1"] + at)
        try await watcher.waitFor("the done", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""event":"done""#)
        }

        watcher.send(SIGINT)
        let result = try await watcher.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(0), "\(result)")
    }

    @Test("watch reports listrd killed with SIGKILL within seconds, and why (nothing listens at its port any more), not at the end of the 30 s resume window")
    func watchReportsKilledDaemon() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        let watcher = try world.launchCtl(["watch", "--json"] + at)
        try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""event":"list""#)
        }

        let killedAt = ContinuousClock.now
        daemon.send(SIGKILL)
        try await watcher.waitFor("the disconnection", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains(#""event":"disconnected""#)
        }
        let noticed = ContinuousClock.now - killedAt
        // About 0.5 s (the first redial, refused); the bound is generous for a loaded machine and
        // still half of the resume window that kept a crashed daemon "connected" before.
        #expect(noticed < .seconds(15), "reported after \(noticed)")
        let lost = try #require(watcher.stdout.split(separator: "\n").first { $0.contains(#""event":"disconnected""#) })
        #expect(lost.contains("is gone: its connection closed without a goodbye") && lost.contains("Connection refused"),
                "the watch says why: \(lost)")

        watcher.send(SIGINT)
        let result = try await watcher.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(0), "\(result)")
    }

    @Test("every watcher sees a change, with the sentence naming the client that made it")
    func severalWatchers() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        let watchers = try (1...3).map { _ in try world.launchCtl(["watch"] + at) }
        for watcher in watchers {
            try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in
                stdout.contains("The list is empty.")
            }
        }
        _ = try await world.ctl(["item", "add", "Milk"] + at)
        for watcher in watchers {
            try await watcher.waitFor("the add", timeout: ListrFixture.deadline) { stdout, _ in
                stdout.range(of: #"listrctl [0-9]+ on .+ added "Milk" as item 1\."#, options: .regularExpression) != nil
            }
            watcher.send(SIGINT)
            #expect(try await watcher.waitForExit(timeout: ListrFixture.deadline).exit == .status(0))
        }
    }

    @Test("watch hears of a commit another program makes to the store file, with no request to listrd in between")
    func commitElsewhere() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        _ = try await world.ctl(["item", "add", "Milk"] + at)
        _ = try await world.ctl(["item", "add", "Bread"] + at)
        let watcher = try world.launchCtl(["watch"] + at)
        try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains("Bread")
        }

        // What the sqlite3 shell would do, while listrd serves the file.
        let queue = try DatabaseQueue(path: world.path("store.sqlite"))
        try await queue.write { db in try db.execute(sql: "DELETE FROM item WHERE title = 'Milk'") }
        try queue.close()

        try await watcher.waitFor("the commit elsewhere", timeout: ListrFixture.deadline) { stdout, _ in
            stdout.contains("another program replaced the list with 1 item.")
        }
        let list = try await world.ctl(["item", "list"] + at)
        #expect(list.stdout == "[ ] Bread\n", "\(list)")
        watcher.send(SIGINT)
        #expect(try await watcher.waitForExit(timeout: ListrFixture.deadline).exit == .status(0))
    }
}
