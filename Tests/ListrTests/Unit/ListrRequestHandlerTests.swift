import Foundation
import ListrKit
import PeerKit
import Testing

@Suite("listrd request handling", .timeLimit(.minutes(1)))
struct ListrRequestHandlerTests {
    let persistence = InMemoryPersistence()
    let recorder = ChangeRecorder()
    let handler: ListrRequestHandler
    let alice = Peer(id: "A", name: "alice", isConnected: true)

    init() throws {
        handler = ListrRequestHandler(
            store: try ItemStore(persistence: persistence, onChange: recorder.record),
            watchers: ListrWatchers { _, _ in }
        )
    }

    private func add(_ titles: String...) async {
        for title in titles { _ = await handler.handle(AddItemCommand(title: title), from: alice) }
    }

    @Test("add answers with the new position, saves before answering, and reports who added it")
    func add() async {
        #expect(await handler.handle(AddItemCommand(title: "Milk"), from: alice) == .message(#"Added "Milk" as item 1."#))
        #expect(persistence.saved.map(\.title) == ["Milk"])
        #expect(await handler.handle(AddItemCommand(title: "Bread"), from: alice) == .message(#"Added "Bread" as item 2."#))
        #expect(recorder.changes.map(\.kind) == [.added, .added])
        #expect(recorder.changes.map(\.client) == ["alice", "alice"])
        #expect(recorder.changes.map(\.index) == [1, 2])
    }

    @Test("list answers one line per item in insertion order, or says the list is empty")
    func list() async {
        #expect(await handler.handle(ListItemsCommand(), from: alice) == .message("The list is empty."))
        await add("Milk", "Bread", "Eggs")
        _ = await handler.handle(CompleteItemCommand(index: 2), from: alice)
        #expect(await handler.handle(ListItemsCommand(), from: alice) == .message("[ ] Milk\n[✓] Bread\n[ ] Eggs"))
    }

    @Test("list pages with limit and offset, and refuses impossible pages")
    func paging() async throws {
        await add("a", "b", "c", "d")
        #expect(await handler.handle(ListItemsCommand(limit: 2, offset: 1), from: alice) == .message("[ ] b\n[ ] c"))
        #expect(await handler.handle(ListItemsCommand(offset: 3), from: alice) == .message("[ ] d"))
        #expect(await handler.handle(ListItemsCommand(offset: 4), from: alice) == .message("There are no items from position 5 on: the list has 4 items."))
        #expect(await handler.handle(ListItemsCommand(limit: 0), from: alice) == .error(ListrError.invalidPage(reason: "the limit 0 is less than 1").description))
        #expect(await handler.handle(ListItemsCommand(offset: -1), from: alice) == .error(ListrError.invalidPage(reason: "the offset -1 is negative").description))
        guard case let .data(page) = await handler.handle(ListItemsCommand(limit: 1, offset: 2, structured: true), from: alice) else {
            Issue.record("a structured list did not answer with data")
            return
        }
        #expect(try ItemPropertyList.decode(page).map(\.title) == ["c"])
    }

    @Test("done and remove answer with the item, or an error for a position out of range")
    func doneAndRemove() async {
        await add("Milk", "Bread")
        #expect(await handler.handle(CompleteItemCommand(index: 1), from: alice) == .message(#"Marked item 1, "Milk", as done."#))
        #expect(await handler.handle(CompleteItemCommand(index: 1), from: alice) == .message(#"Item 1, "Milk", was already done."#))
        #expect(await handler.handle(RemoveItemCommand(index: 2), from: alice) == .message(#"Removed item 2, "Bread"."#))
        #expect(await handler.handle(RemoveItemCommand(index: 2), from: alice) == .error(ListrError.noSuchItem(position: 2, count: 1).description))
        #expect(await handler.handle(CompleteItemCommand(index: 0), from: alice) == .error(ListrError.noSuchItem(position: 0, count: 1).description))
        #expect(persistence.saved.map(\.title) == ["Milk"])
        // Completing an item already done changes nothing, so it is not reported.
        #expect(recorder.changes.map(\.kind) == [.added, .added, .done, .removed])
    }

    @Test("dump answers data that replace accepts, restoring the same items")
    func dumpReplaceRoundTrip() async throws {
        await add("Milk", "Bread")
        _ = await handler.handle(CompleteItemCommand(index: 1), from: alice)
        let before = persistence.saved
        guard case let .data(dump) = await handler.handle(DumpDatabaseCommand(), from: alice) else {
            Issue.record("dump did not answer with data")
            return
        }
        await add("Eggs")
        #expect(await handler.handle(ReplaceDatabaseCommand(data: dump), from: alice) == .message("Replaced the list with 2 items."))
        #expect(persistence.saved == before)
        #expect(recorder.changes.last == ListrChange(kind: .replaced, client: "alice", count: 2))
    }

    @Test("a malformed replace is answered with an error and changes nothing")
    func malformedReplace() async {
        await add("Milk")
        let before = persistence.saved
        let saves = persistence.saveCount
        let response = await handler.handle(ReplaceDatabaseCommand(data: Data("<plist><dict/></plist>".utf8)), from: alice)
        guard case let .error(text) = response else {
            Issue.record("expected an error, got \(response)")
            return
        }
        #expect(text.hasPrefix("The data is not a Listr property list"))
        #expect(persistence.saved == before)
        #expect(persistence.saveCount == saves)
        #expect(await handler.handle(ListItemsCommand(), from: alice) == .message("[ ] Milk"))
    }

    @Test("a change that cannot be saved is refused, not made, and not reported")
    func failedSave() async {
        await add("Milk")
        persistence.failSaves = true
        let response = await handler.handle(AddItemCommand(title: "Bread"), from: alice)
        #expect(response == .error(ListrError.saveFailed(path: "memory", reason: "the disk is full").description))
        persistence.failSaves = false
        #expect(await handler.handle(ListItemsCommand(), from: alice) == .message("[ ] Milk"))
        #expect(await handler.handle(AddItemCommand(title: "Eggs"), from: alice) == .message(#"Added "Eggs" as item 2."#))
        #expect(recorder.changes.map(\.item?.title) == ["Milk", "Eggs"])
    }

    @Test("concurrent adds are applied one at a time, none is lost, and they are reported in commit order")
    func concurrentAdds() async {
        await withTaskGroup(of: Void.self) { group in
            for number in 1...50 {
                group.addTask { _ = await handler.handle(AddItemCommand(title: "item \(number)"), from: alice) }
            }
        }
        #expect(Set(persistence.saved.map(\.title)) == Set((1...50).map { "item \($0)" }))
        #expect(persistence.saveCount == 50)
        #expect(recorder.changes.map(\.index) == Array(1...50).map(Optional.some))
        #expect(recorder.changes.map(\.item?.title) == persistence.saved.map(\.title))
    }

    @Test("the item limit refuses an add or a replace beyond it, and cannot be set below the list")
    func itemLimit() async throws {
        await add("Milk", "Bread")
        #expect(await handler.handle(SetSettingCommand(key: "item-limit", value: "2"), from: alice) == .message(#"Set item-limit to "2"."#))
        #expect(await handler.handle(AddItemCommand(title: "Eggs"), from: alice) == .error(ListrError.itemLimitReached(limit: 2, wanted: 3).description))
        let three = try ItemPropertyList.encode([Item(title: "a"), Item(title: "b"), Item(title: "c")])
        #expect(await handler.handle(ReplaceDatabaseCommand(data: three), from: alice) == .error(ListrError.itemLimitReached(limit: 2, wanted: 3).description))
        let refused = await handler.handle(SetSettingCommand(key: "item-limit", value: "1"), from: alice)
        #expect(refused == .error(ListrError.invalidSetting(key: "item-limit", value: "1", reason: "the list holds 2 items already; remove some first").description))
        #expect(persistence.saved.map(\.title) == ["Milk", "Bread"])
        #expect(persistence.savedSettings?.itemLimit == 2)
    }

    @Test("settings: get answers JSON, set changes one and reports it, reset restores the defaults")
    func settings() async throws {
        guard case let .data(json) = await handler.handle(GetSettingsCommand(), from: alice) else {
            Issue.record("get did not answer with data")
            return
        }
        #expect(try JSONDecoder().decode(ListrSettings.self, from: json) == .defaults)
        #expect(await handler.handle(SetSettingCommand(key: "log-level", value: "debug"), from: alice) == .message(#"Set log-level to "debug"."#))
        #expect(await handler.handle(SetSettingCommand(key: "name", value: "Kitchen"), from: alice) == .message(#"Set name to "Kitchen"."#))
        #expect(await handler.handle(SetSettingCommand(key: "colour", value: "red"), from: alice) == .error(ListrError.unknownSetting("colour").description))
        #expect(persistence.savedSettings == ListrSettings(logLevel: .debug, name: "Kitchen", itemLimit: 1_000_000))
        #expect(recorder.changes.compactMap(\.settings?.name) == [ListrSettings.defaultName, "Kitchen"])

        let reset = await handler.handle(ResetSettingsCommand(), from: alice)
        guard case let .message(text) = reset else {
            Issue.record("reset answered \(reset)")
            return
        }
        #expect(text.hasPrefix(#"Reset the settings to their defaults: log-level "info", name ""#))
        #expect(persistence.savedSettings == .defaults)
        #expect(recorder.changes.last?.kind == .settings)
    }

    @Test("watch answers the current list and subscribes the sender to every later change")
    func watch() async throws {
        let sent = SentMessages()
        let watchers = ListrWatchers { message, peer in sent.append(message, to: peer) }
        let store = try ItemStore(persistence: InMemoryPersistence([Item(title: "Milk")]), onChange: watchers.publish)
        let handler = ListrRequestHandler(store: store, watchers: watchers)
        let bob = Peer(id: "B", name: "bob", isConnected: true)

        guard case let .data(list) = await handler.handle(WatchCommand(), from: bob) else {
            Issue.record("watch did not answer with data")
            return
        }
        #expect(try ItemPropertyList.decode(list).map(\.title) == ["Milk"])
        #expect(watchers.contains(bob))
        _ = await handler.handle(AddItemCommand(title: "Bread"), from: alice)
        await sent.waitFor(count: 1)
        #expect(sent.messages == [.init(peer: "B", message: .change(ListrChange(kind: .added, client: "alice", index: 2, item: sent.firstItem)))])
    }
}
