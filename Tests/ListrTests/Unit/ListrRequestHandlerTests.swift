import Foundation
import ListrKit
import Testing

@Suite("listrd request handling")
struct ListrRequestHandlerTests {
    let persistence = InMemoryPersistence()
    let handler: ListrRequestHandler

    init() throws {
        handler = ListrRequestHandler(store: try ItemStore(persistence: persistence))
    }

    private func add(_ titles: String...) async {
        for title in titles { _ = await handler.handle(AddItemCommand(title: title)) }
    }

    @Test("add answers with the new position and saves before answering")
    func add() async {
        #expect(await handler.handle(AddItemCommand(title: "Milk")) == .message(#"Added "Milk" as item 1."#))
        #expect(persistence.saved.map(\.title) == ["Milk"])
        #expect(await handler.handle(AddItemCommand(title: "Bread")) == .message(#"Added "Bread" as item 2."#))
    }

    @Test("list answers one line per item in insertion order, or says the list is empty")
    func list() async {
        #expect(await handler.handle(ListItemsCommand()) == .message("The list is empty."))
        await add("Milk", "Bread", "Eggs")
        _ = await handler.handle(CompleteItemCommand(index: 2))
        #expect(await handler.handle(ListItemsCommand()) == .message("[ ] Milk\n[✓] Bread\n[ ] Eggs"))
    }

    @Test("done and remove answer with the item, or an error for a position out of range")
    func doneAndRemove() async {
        await add("Milk", "Bread")
        #expect(await handler.handle(CompleteItemCommand(index: 1)) == .message(#"Marked item 1, "Milk", as done."#))
        #expect(await handler.handle(CompleteItemCommand(index: 1)) == .message(#"Item 1, "Milk", was already done."#))
        #expect(await handler.handle(RemoveItemCommand(index: 2)) == .message(#"Removed item 2, "Bread"."#))
        #expect(await handler.handle(RemoveItemCommand(index: 2)) == .error(ListrError.noSuchItem(position: 2, count: 1).description))
        #expect(await handler.handle(CompleteItemCommand(index: 0)) == .error(ListrError.noSuchItem(position: 0, count: 1).description))
        #expect(persistence.saved.map(\.title) == ["Milk"])
    }

    @Test("dump answers data that replace accepts, restoring the same items")
    func dumpReplaceRoundTrip() async throws {
        await add("Milk", "Bread")
        _ = await handler.handle(CompleteItemCommand(index: 1))
        let before = persistence.saved
        guard case let .data(dump) = await handler.handle(DumpDatabaseCommand()) else {
            Issue.record("dump did not answer with data")
            return
        }
        await add("Eggs")
        #expect(await handler.handle(ReplaceDatabaseCommand(data: dump)) == .message("Replaced the list with 2 items."))
        #expect(persistence.saved == before)
    }

    @Test("a malformed replace is answered with an error and changes nothing")
    func malformedReplace() async {
        await add("Milk")
        let before = persistence.saved
        let saves = persistence.saveCount
        let response = await handler.handle(ReplaceDatabaseCommand(data: Data("<plist><dict/></plist>".utf8)))
        guard case let .error(text) = response else {
            Issue.record("expected an error, got \(response)")
            return
        }
        #expect(text.hasPrefix("The data is not a Listr property list"))
        #expect(persistence.saved == before)
        #expect(persistence.saveCount == saves)
        #expect(await handler.handle(ListItemsCommand()) == .message("[ ] Milk"))
    }

    @Test("a change that cannot be saved is refused and not made")
    func failedSave() async {
        await add("Milk")
        persistence.failSaves = true
        let response = await handler.handle(AddItemCommand(title: "Bread"))
        #expect(response == .error(ListrError.saveFailed(path: "memory", reason: "the disk is full").description))
        persistence.failSaves = false
        #expect(await handler.handle(ListItemsCommand()) == .message("[ ] Milk"))
    }

    @Test("concurrent adds are applied one at a time and none is lost")
    func concurrentAdds() async {
        await withTaskGroup(of: Void.self) { group in
            for number in 1...50 {
                group.addTask { _ = await handler.handle(AddItemCommand(title: "item \(number)")) }
            }
        }
        #expect(Set(persistence.saved.map(\.title)) == Set((1...50).map { "item \($0)" }))
        #expect(persistence.saveCount == 50)
    }
}
