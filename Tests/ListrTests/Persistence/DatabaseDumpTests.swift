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
