import Foundation
import GRDB
@testable import ListrKit
import Testing

@Suite("A store dump reads a snapshot of the database file")
struct DatabaseDumpTests {
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "listr-dump-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    private func remove() { try? FileManager.default.removeItem(atPath: folder) }

    private func joined(_ pieces: ItemPropertyListPieces) async throws -> Data {
        var data = Data()
        for try await piece in pieces { data.append(contentsOf: piece.readableBytesView) }
        return data
    }

    @Test("the dump is the list as it was when it began, though items change while it is read, and the changes do not wait for it")
    func snapshot() async throws {
        defer { remove() }
        let database = try StoreFile(path: folder + "/store.sqlite").open().database
        let items = (1...2_000).map { Item(title: "item \($0) & <more> é", done: $0 % 3 == 0) }
        try database.replaceAll(with: items)
        let expected = try #require(ItemPropertyListWriter.data(for: items))

        let pieces = try #require(try ItemPropertyListPieces.make(rows: try database.dumpRows(), pieceLength: 4096))
        #expect(pieces.size == expected.count)
        var iterator = pieces.makeAsyncIterator()
        var dumped = Data()
        if let first = try await iterator.next() { dumped.append(contentsOf: first.readableBytesView) }
        // Mid-dump, every kind of change commits at once (a snapshot holds no lock writers wait for).
        try database.append(Item(title: "added mid-dump"))
        _ = try database.remove(at: 1)
        _ = try database.complete(at: 2)
        try database.replaceAll(with: Array(items.prefix(10)))
        while let piece = try await iterator.next() { dumped.append(contentsOf: piece.readableBytesView) }

        #expect(dumped == expected)
        #expect(try database.items(offset: 0, limit: nil) == Array(items.prefix(10)))
        let after = try #require(try ItemPropertyListPieces.make(rows: try database.dumpRows()))
        #expect(try await joined(after) == ItemPropertyListWriter.data(for: Array(items.prefix(10))))
    }

    @Test("the store keeps the dump's length through every kind of change, once measured, and the dump it announces is the one it sends")
    func keptLength() async throws {
        defer { remove() }
        let database = try StoreFile(path: folder + "/store.sqlite").open().database
        try database.replaceAll(with: (1...50).map { Item(title: "item \($0) & <b>", done: $0 % 2 == 0) })
        let store = try ItemStore(persistence: database)
        let handler = ListrRequestHandler(store: store, watchers: ListrWatchers { _, _ in })

        /// Dumps through the handler's path, and checks the size against a fresh measure and the bytes.
        func check(_ step: String) async throws {
            let dump = try await store.dump()
            let measured = try #require(try ItemPropertyListPieces.make(rows: dump.rows), "\(step)")
            if let kept = dump.itemsLength { #expect(kept == measured.itemsLength, "\(step)") }
            let expected = try #require(ItemPropertyListWriter.data(for: try await store.items))
            #expect(try await handler.dump().size == Int64(expected.count), "\(step)")
            #expect(try await joined(measured) == expected, "\(step)")
        }

        #expect(try await store.dump().itemsLength == nil)  // opened: not measured yet
        try await check("first dump")
        #expect(try await store.dump().itemsLength != nil)  // the handler's dump taught the store
        _ = try await store.add(title: "Eggs & <ham>", by: "t")
        try await check("add")
        _ = try await store.complete(at: 3, by: "t")
        _ = try await store.complete(at: 2, by: "t")  // already done: no change
        try await check("complete")
        _ = try await store.remove(at: 1, by: "t")
        _ = try await store.remove(at: try await store.count, by: "t")
        try await check("remove")
        try await store.replace(with: [], by: "t")
        #expect(try await store.dump().itemsLength == 0)
        try await check("replace with nothing")
        try await store.replace(with: [Item(title: "é 🥛 <x>")], by: "t")
        try await check("replace")
        try await store.updateSettings(by: "t") { $0.name = "renamed" }
        try await check("settings")
    }

    @Test("an empty store dumps as an empty list")
    func empty() async throws {
        defer { remove() }
        let database = try StoreFile(path: folder + "/store.sqlite").open().database
        let pieces = try #require(try ItemPropertyListPieces.make(rows: try database.dumpRows()))
        #expect(try await joined(pieces) == ItemPropertyListWriter.data(for: []))
    }

    @Test("a title stored as bytes that are not UTF-8 is dumped as Foundation writes its repaired text")
    func invalidUTF8() async throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        let milk = Item(title: "Milk")
        let odd = Item(title: "placeholder")
        do {
            let database = try StoreFile(path: path).open().database
            try database.replaceAll(with: [milk, odd])
        }
        // Another program writes bytes that are not UTF-8 into the file.
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "UPDATE item SET title = CAST(x'61FF62' AS TEXT) WHERE sequence = 2")
        }
        try queue.close()

        let database = try StoreFile(path: path).open().database
        #expect(try ItemPropertyListPieces.make(rows: try database.dumpRows()) == nil)
        let handler = ListrRequestHandler(store: try ItemStore(persistence: database), watchers: ListrWatchers { _, _ in })
        let dump = try await handler.dump()
        let repaired = [milk, Item(id: odd.id, title: "a\u{FFFD}b")]
        #expect(dump.size == Int64(try ItemPropertyList.encode(repaired).count))
    }
}
