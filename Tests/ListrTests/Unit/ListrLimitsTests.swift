import Foundation
import ListrKit
import PeerKit
import Testing

@Suite("Listr limits: titles, the store's size, answers split into pages", .timeLimit(.minutes(1)))
struct ListrLimitsTests {
    let alice = Peer(id: "A", name: "alice", isConnected: true)

    private func handler(
        _ persistence: InMemoryPersistence = InMemoryPersistence(), maximumTitleBytes: Int = ListrLimits.maximumStoreTitleBytes,
        maximumAnswerBytes: Int = ListrLimits.maximumAnswerBytes
    ) throws -> ListrRequestHandler {
        ListrRequestHandler(
            store: try ItemStore(persistence: persistence, maximumTitleBytes: maximumTitleBytes),
            watchers: ListrWatchers { _, _ in }, maximumAnswerBytes: maximumAnswerBytes
        )
    }

    @Test("a 9 MiB title is refused with a sentence that does not repeat it, and nothing is saved")
    func hugeTitle() async throws {
        let persistence = InMemoryPersistence()
        let handler = try handler(persistence)
        let title = String(repeating: "x", count: 9 * 1024 * 1024)
        let answer = await handler.handle(AddItemCommand(title: title), from: alice)
        let sentence = "The title is 9437184 bytes long, and a title may have at most 4096 bytes (UTF-8). Nothing was changed; give a shorter title."
        #expect(answer == .error(sentence))
        #expect(persistence.saved.isEmpty)
        #expect(persistence.saveCount == 0)
    }

    @Test("a title may have 4,096 bytes of UTF-8, not one more, however many characters that is")
    func titleLimit() throws {
        #expect(ListrLimits.maximumTitleBytes == 4096)
        #expect(throws: Never.self) { try ItemList.validate(title: String(repeating: "a", count: 4096)) }
        #expect(throws: ListrError.titleTooLong(bytes: 4097, limit: 4096)) { try ItemList.validate(title: String(repeating: "a", count: 4097)) }
        // 1,366 euro signs are 1,366 characters and 4,098 bytes.
        #expect(throws: ListrError.titleTooLong(bytes: 4098, limit: 4096)) { try ItemList.validate(title: String(repeating: "€", count: 1366)) }
        let problem = ItemList.problem(in: [Item(title: "Milk"), Item(title: String(repeating: "b", count: 5000))])
        #expect(problem == "item 2 has an unusable title: The title is 5000 bytes long, and a title may have at most 4096 bytes (UTF-8). Nothing was changed; give a shorter title.")
    }

    @Test("a store at its size limit refuses adds and replaces with a sentence, and takes adds again once items are removed")
    func storeFull() async throws {
        let persistence = InMemoryPersistence([Item(title: String(repeating: "a", count: 40))])
        let handler = try handler(persistence, maximumTitleBytes: 100)
        // 40 bytes were there already: the store counts them when it opens.
        #expect(await handler.handle(AddItemCommand(title: String(repeating: "b", count: 60)), from: alice) == .message("Added \"\(String(repeating: "b", count: 60))\" as item 2."))
        let full = await handler.handle(AddItemCommand(title: "c"), from: alice)
        #expect(full == .error("The titles would take 101 bytes, and the store holds at most 100 bytes of titles. Nothing was changed; remove items to make room."))
        #expect(persistence.saved.count == 2)
        _ = await handler.handle(RemoveItemCommand(index: 1), from: alice)
        #expect(await handler.handle(AddItemCommand(title: "c"), from: alice) == .message("Added \"c\" as item 2."))
        let list = try ItemPropertyList.encode([Item(title: String(repeating: "d", count: 60)), Item(title: String(repeating: "e", count: 41))])
        let replaced = await handler.handle(ReplaceDatabaseCommand(data: list), from: alice)
        #expect(replaced == .error(ListrError.storeFull(titleBytes: 101, limit: 100).description))
        #expect(persistence.saved.map(\.title) == [String(repeating: "b", count: 60), "c"])
    }

    @Test("the default store limit is 64 MiB of titles")
    func defaultStoreLimit() throws {
        #expect(try ItemStore(persistence: InMemoryPersistence()).maximumTitleBytes == 64 * 1024 * 1024)
    }

    @Test("a list larger than one answer is answered in pages that each fit, and reading page after page gives every item in order")
    func pages() async throws {
        let items = (1...50).map { Item(title: String(format: "item %02d ", $0) + String(repeating: "x", count: 100)) }
        let limit = 2000
        let handler = try handler(InMemoryPersistence(items), maximumAnswerBytes: limit)
        var read: [Item] = []
        var pages = 0
        while true {
            guard case let .data(data) = await handler.handle(ListItemsCommand(offset: read.count, structured: true), from: alice) else {
                Issue.record("a structured page did not answer with data")
                return
            }
            let page = try ItemPropertyList.decode(data)
            if page.isEmpty { break }
            pages += 1
            let bytes = page.reduce(0) { $0 + ListrRequestHandler.propertyListBytes($1) }
            #expect(bytes <= limit, "page \(pages) holds \(bytes) bytes of items")
            read += page
        }
        #expect(pages > 1)
        #expect(read == items)
        // A page asked for with a limit is never longer than the limit either.
        guard case let .data(data) = await handler.handle(ListItemsCommand(limit: 3, offset: 10, structured: true), from: alice) else { return }
        #expect(try ItemPropertyList.decode(data) == Array(items[10..<13]))
    }

    @Test("a list message larger than one answer says how many items it leaves out and how to list them")
    func messagePage() async throws {
        let items = (1...50).map { Item(title: "item \($0) " + String(repeating: "x", count: 100)) }
        let handler = try handler(InMemoryPersistence(items), maximumAnswerBytes: 2000)
        guard case let .message(text) = await handler.handle(ListItemsCommand(), from: alice) else {
            Issue.record("list did not answer with a message")
            return
        }
        let lines = text.split(separator: "\n")
        let shown = lines.count - 1
        #expect(shown > 0 && shown < 50)
        #expect(lines.last == "… and \(50 - shown) more items, too many for one answer: list them with --offset \(shown).")
        #expect(text.utf8.count < 2000 + 300)
    }

    @Test("watch answers the list's first page when the list is larger than one answer; a dump in one answer is refused with a sentence")
    func watchAndDump() async throws {
        let items = (1...50).map { Item(title: "item \($0) " + String(repeating: "x", count: 100)) }
        let handler = try handler(InMemoryPersistence(items), maximumAnswerBytes: 2000)
        guard case let .data(data) = await handler.handle(WatchCommand(), from: alice) else {
            Issue.record("watch did not answer with data")
            return
        }
        let first = try ItemPropertyList.decode(data)
        #expect(!first.isEmpty && first.count < 50)
        #expect(first == Array(items.prefix(first.count)))
        #expect(handler.watchers.contains(alice))
        let dump = await handler.handle(DumpDatabaseCommand(), from: alice)
        #expect(dump == .error(ListrError.answerTooLarge(items: 50, limit: 2000).description))
        // At the real limit, the same list fits in one answer.
        let roomy = try self.handler(InMemoryPersistence(items))
        guard case let .data(whole) = await roomy.handle(DumpDatabaseCommand(), from: alice) else {
            Issue.record("a dump of a small list did not answer with data")
            return
        }
        #expect(try ItemPropertyList.decode(whole) == items)
    }
}
