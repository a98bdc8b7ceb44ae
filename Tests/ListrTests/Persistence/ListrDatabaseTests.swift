import Foundation
import ListrKit
import Testing

@Suite("ListrDatabase: the SQLite persistence")
struct ListrDatabaseTests {
    @Test("positions follow insertion order through adds, completions and removals")
    func positions() throws {
        let database = try ListrDatabase.inMemory()
        for title in ["a", "b", "c", "d"] { try database.append(Item(title: title)) }
        #expect(try database.complete(at: 3).title == "c")
        #expect(try database.remove(at: 1).title == "a")
        try database.append(Item(title: "e"))
        #expect(try database.items(offset: 0, limit: nil).map(\.title) == ["b", "c", "d", "e"])
        #expect(try database.items(offset: 0, limit: nil).map(\.done) == [false, true, false, false])
        #expect(try database.items(offset: 1, limit: 2).map(\.title) == ["c", "d"])
        #expect(try database.count() == 4)
    }

    @Test("replace swaps every item in one transaction, ids and order kept")
    func replace() throws {
        let database = try ListrDatabase.inMemory()
        try database.append(Item(title: "old"))
        let items = (1...1000).map { Item(title: "item \($0)", done: $0 % 3 == 0) }
        try database.replaceAll(with: items)
        #expect(try database.items(offset: 0, limit: nil) == items)
        try database.append(Item(title: "after"))
        #expect(try database.items(offset: 1000, limit: nil).map(\.title) == ["after"])
    }

    @Test("two items with one id cannot be stored: the primary key refuses, and nothing changes")
    func duplicateIDs() throws {
        let database = try ListrDatabase.inMemory()
        let milk = Item(title: "Milk")
        try database.append(milk)
        #expect(throws: ListrError.self) { try database.append(milk) }
        #expect(throws: ListrError.self) { try database.replaceAll(with: [Item(title: "x"), milk, milk]) }
        #expect(try database.items(offset: 0, limit: nil) == [milk])
    }

    @Test("the titles' size is counted in UTF-8 bytes, not characters, and a store opened on the database starts from it")
    func titleBytes() async throws {
        let database = try ListrDatabase.inMemory()
        #expect(try database.titleBytes() == 0)
        for title in ["Milk", "Grüße", "日本語", "🥛"] { try database.append(Item(title: title)) }
        #expect(try database.titleBytes() == 4 + 7 + 9 + 4)
        // A store over the database counts them: 24 of 30 bytes are taken, so 7 more are refused.
        let store = try ItemStore(persistence: database, maximumTitleBytes: 30)
        await #expect(throws: ListrError.storeFull(titleBytes: 31, limit: 30)) { try await store.add(title: "1234567", by: "test") }
        _ = try await store.add(title: "123456", by: "test")
        #expect(try database.titleBytes() == 30)
    }

    @Test("settings are one JSON value, absent until saved")
    func settings() throws {
        let database = try ListrDatabase.inMemory()
        #expect(try database.loadSettings() == nil)
        let settings = ListrSettings(logLevel: .error, name: "Shed", itemLimit: 3)
        try database.saveSettings(settings)
        #expect(try database.loadSettings() == settings)
    }
}
