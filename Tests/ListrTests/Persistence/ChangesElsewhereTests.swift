import Foundation
import GRDB
@testable import ListrKit
import Synchronization
import Testing

@Suite("Commits another program makes to the store file while listrd serves it")
struct ChangesElsewhereTests {
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "listr-elsewhere-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    private func remove() { try? FileManager.default.removeItem(atPath: folder) }

    /// Commits `sql` through a connection of its own, as the `sqlite3` shell would.
    private func commitElsewhere(_ path: String, _ sql: String, arguments: StatementArguments = []) async throws {
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in try db.execute(sql: sql, arguments: arguments) }
        try queue.close()
    }

    @Test("the database tells another connection's commits from its own, by data_version")
    func database() async throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        let database = try StoreFile(path: path).open().database
        #expect(try database.changedElsewhere() == false)  // the first look takes note
        try database.append(Item(title: "ours"))
        _ = try database.complete(at: 1)
        try database.saveSettings(.defaults)
        #expect(try database.changedElsewhere() == false, "its own commits counted as another program's")
        try await commitElsewhere(path, "DELETE FROM item")
        #expect(try database.changedElsewhere() == true)
        #expect(try database.changedElsewhere() == false, "one commit elsewhere was reported twice")
        #expect(try ListrDatabase.inMemory().changedElsewhere() == false)
    }

    @Test("the store reads the count and settings again, the dump's size stays true, and watchers hear a replace and the new settings")
    func store() async throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        let database = try StoreFile(path: path).open().database
        try database.replaceAll(with: (1...50).map { Item(title: "item \($0)") })
        let changes = Mutex<[ListrChange]>([])
        let store = try ItemStore(persistence: database) { change in changes.withLock { $0.append(change) } }
        let handler = ListrRequestHandler(store: store, watchers: ListrWatchers { _, _ in })
        _ = try await handler.dump()
        #expect(try await store.dump().itemsLength != nil)  // measured, and kept from now on

        var renamed = ListrSettings.defaults
        renamed.name = "renamed elsewhere"
        let json = String(decoding: try JSONEncoder().encode(renamed), as: UTF8.self)
        try await commitElsewhere(path, """
            DELETE FROM item WHERE sequence <= 10;
            UPDATE item SET title = 'a longer title, written by another program' WHERE sequence = 20;
            INSERT OR REPLACE INTO settings (id, json) VALUES (1, ?);
            """, arguments: [json])

        #expect(try await store.count == 40)
        #expect(try await store.settings.name == "renamed elsewhere")
        let expected = try #require(ItemPropertyListWriter.data(for: try await store.items))
        #expect(try await handler.dump().size == Int64(expected.count))
        #expect(changes.withLock { $0 } == [
            ListrChange(kind: .replaced, client: ItemStore.elsewhere, count: 40),
            ListrChange(kind: .settings, client: ItemStore.elsewhere, settings: renamed),
        ])
        #expect(changes.withLock { $0.first?.sentence } == "another program replaced the list with 40 items.")

        // The store's own changes after that are reported once each, as before.
        changes.withLock { $0.removeAll() }
        _ = try await store.add(title: "ours", by: "t")
        #expect(try await store.count == 41)
        #expect(changes.withLock { $0.map(\.kind) } == [.added])
    }

    @Test("after another program removed items, an add reports its true position and an item limit counts the true number")
    func positions() async throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        let database = try StoreFile(path: path).open().database
        try database.replaceAll(with: (1...5).map { Item(title: "item \($0)") })
        let store = try ItemStore(persistence: database)
        try await store.updateSettings(by: "t") { $0.itemLimit = 5 }
        try await commitElsewhere(path, "DELETE FROM item WHERE sequence > 2")
        #expect(try await store.add(title: "third", by: "t").position == 3)
        _ = try await store.add(title: "fourth", by: "t")
        _ = try await store.add(title: "fifth", by: "t")
        await #expect(throws: ListrError.itemLimitReached(limit: 5, wanted: 6)) {
            _ = try await store.add(title: "sixth", by: "t")
        }
    }

    @Test("a change waits for another program's write transaction, then fails with a sentence that names it")
    func busy() async throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        let database = try StoreFile(path: path).open().database
        let store = try ItemStore(persistence: database)
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true  // the transaction stays open between accesses
        let other = try DatabaseQueue(path: path, configuration: configuration)
        try await other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
        let started = ContinuousClock.now
        await #expect(throws: ListrError.storeBusy(path: database.path)) {
            _ = try await store.add(title: "waits", by: "t")
        }
        // A lower bound only: that it waited at all, not how fast the machine is.
        #expect(ContinuousClock.now - started >= ListrDatabase.busyTimeout - .milliseconds(100), "it failed without waiting for the lock")
        #expect(ListrError.storeBusy(path: database.path).description.contains("another program has been writing to \(database.path) for over 2 seconds"))
        try await other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
        try other.close()
        #expect(try await store.add(title: "now", by: "t").position == 1)
    }
}
