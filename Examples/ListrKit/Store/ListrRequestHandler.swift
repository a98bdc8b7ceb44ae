/// What `listrd` answers to each command, apart from the network: every command becomes a
/// ``CLIResponse``, and every failure an ``CLIResponse/error(_:)`` sentence.
///
/// `listrd` registers one method per command with `PeerTransceiver.respond(to:)`; tests call the
/// methods directly.
public struct ListrRequestHandler: Sendable {
    /// The store the commands read and change.
    public let store: ItemStore

    /// Creates a handler for `store`.
    public init(store: ItemStore) {
        self.store = store
    }

    /// Adds the item; answers `Added "Milk" as item 3.`
    public func handle(_ command: AddItemCommand) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let (item, position) = try await store.add(title: command.title)
            return .message("Added \(Self.quote(item.title)) as item \(position).")
        }
    }

    /// Lists the items, one `[ ] title` or `[✓] title` line each.
    public func handle(_ command: ListItemsCommand) async -> CLIResponse {
        let list = ItemList(await store.items)
        return .message(list.items.isEmpty ? "The list is empty." : list.rendered)
    }

    /// Marks an item as done.
    public func handle(_ command: CompleteItemCommand) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let before = try await store.complete(at: command.index)
            return before.done
                ? .message("Item \(command.index), \(Self.quote(before.title)), was already done.")
                : .message("Marked item \(command.index), \(Self.quote(before.title)), as done.")
        }
    }

    /// Removes an item.
    public func handle(_ command: RemoveItemCommand) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let removed = try await store.remove(at: command.index)
            return .message("Removed item \(command.index), \(Self.quote(removed.title)).")
        }
    }

    /// Answers the whole list as an XML property list.
    public func handle(_ command: DumpDatabaseCommand) async -> CLIResponse {
        do {
            return .data(try ItemPropertyList.encode(await store.items))
        } catch {
            return .error("The list could not be encoded as a property list: \(error).")
        }
    }

    /// Validates the property list, then replaces the whole list with it.
    public func handle(_ command: ReplaceDatabaseCommand) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let items = try ItemPropertyList.decode(command.data)
            try await store.replace(with: items)
            return .message("Replaced the list with \(items.count) item\(items.count == 1 ? "" : "s").")
        }
    }

    private func answer(_ body: () async throws(ListrError) -> CLIResponse) async -> CLIResponse {
        do {
            return try await body()
        } catch {
            return .error(error.description)
        }
    }

    private static func quote(_ title: String) -> String {
        "\"\(title)\""
    }
}
