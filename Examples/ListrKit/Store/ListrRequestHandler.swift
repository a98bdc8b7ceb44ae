import Foundation
import PeerKit

/// What `listrd` answers to each command, apart from the network: every command becomes a
/// ``CLIResponse``, and every failure an ``CLIResponse/error(_:)`` sentence.
///
/// It touches no socket: `listrd` registers one method per command with
/// `PeerTransceiver.respond(to:)` and passes the sender, and tests call the methods directly
/// with a made-up `Peer`. The sender's name is what watchers are told made the change.
public struct ListrRequestHandler: Sendable {
    /// The store the commands read and change.
    public let store: ItemStore
    /// The clients watching the list.
    public let watchers: ListrWatchers
    /// The most bytes of items in one answer (``ListrLimits/maximumAnswerBytes``): a list page,
    /// the list a watch starts from.
    public let maximumAnswerBytes: Int
    /// Which refusals ``serve(on:logger:)`` logs: the first of each peer's series, then a count.
    public let refusals: RefusalLog

    /// Creates a handler for `store` whose ``WatchCommand`` subscribes to `watchers`; answers
    /// hold at most `maximumAnswerBytes` of items (tests make it small); `refusals` says which
    /// refusals to log.
    public init(
        store: ItemStore, watchers: ListrWatchers,
        maximumAnswerBytes: Int = ListrLimits.maximumAnswerBytes, refusals: RefusalLog = RefusalLog()
    ) {
        self.store = store
        self.watchers = watchers
        self.maximumAnswerBytes = maximumAnswerBytes
        self.refusals = refusals
    }

    /// An item's size in a property-list answer: its `<dict>`'s length, or, for a title only
    /// Foundation can write, a bound on it (every byte escaped, and the rest of the dict).
    public static func propertyListBytes(_ item: Item) -> Int {
        ItemPropertyListWriter.length(of: item) ?? (item.title.utf8.count * 6 + 256)
    }

    /// An item's size in a message answer: its line, every byte of the title counted twice (JSON
    /// escapes a quote or a backslash with one more byte).
    public static func lineBytes(_ item: Item) -> Int {
        item.title.utf8.count * 2 + 8
    }

    /// Adds the item; answers `Added "Milk" as item 3.`
    public func handle(_ command: AddItemCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let (item, position) = try await store.add(title: command.title, by: sender.name)
            return .message("Added \(Self.quote(item.title)) as item \(position).")
        }
    }

    /// Lists the items, or a page of them, one `[ ] title` or `[✓] title` line each; with
    /// `structured`, answers the page as a property list in the dump format.
    ///
    /// A page stops at ``maximumAnswerBytes`` of items (it always holds one): a structured page
    /// may hold fewer items than asked for, and the client asks for the next page from where it
    /// ended (an empty page is the end); a message ends with a line saying how many items it
    /// leaves out and which `--offset` lists them.
    public func handle(_ command: ListItemsCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let offset = command.offset ?? 0
            let structured = command.structured == true
            let page = try await store.items(
                offset: offset, limit: command.limit, maximumBytes: maximumAnswerBytes,
                measure: structured ? Self.propertyListBytes : Self.lineBytes
            )
            if structured {
                return try Self.propertyList(page)
            }
            let count = try await store.count
            if page.isEmpty {
                return .message(count == 0
                    ? "The list is empty."
                    : "There are no items from position \(offset + 1) on: the list has \(count) item\(count == 1 ? "" : "s").")
            }
            let wanted = min(command.limit ?? Int.max, count - offset)
            guard page.count < wanted else { return .message(ItemList(page).rendered) }
            let left = wanted - page.count
            return .message(ItemList(page).rendered + "\n… and \(left) more item\(left == 1 ? "" : "s"), too many for one answer: list them with --offset \(offset + page.count).")
        }
    }

    /// Marks an item as done.
    public func handle(_ command: CompleteItemCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let before = try await store.complete(at: command.index, by: sender.name)
            return before.done
                ? .message("Item \(command.index), \(Self.quote(before.title)), was already done.")
                : .message("Marked item \(command.index), \(Self.quote(before.title)), as done.")
        }
    }

    /// Removes an item.
    public func handle(_ command: RemoveItemCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let removed = try await store.remove(at: command.index, by: sender.name)
            return .message("Removed item \(command.index), \(Self.quote(removed.title)).")
        }
    }

    /// Answers the whole list as an XML property list, or an error when it is larger than
    /// ``maximumAnswerBytes`` (the client should ask for it as a resource).
    public func handle(_ command: DumpDatabaseCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let items = try await store.items(offset: 0, limit: nil, maximumBytes: maximumAnswerBytes, measure: Self.propertyListBytes)
            let count = try await store.count
            guard items.count >= count else { throw .answerTooLarge(items: count, limit: maximumAnswerBytes) }
            return try Self.propertyList(items)
        }
    }

    /// The whole list as an XML property list, for a dump sent as a resource, and its size.
    ///
    /// The list is one consistent snapshot (``ItemStore/dump()``), read while the property list
    /// is written piece by piece as the resource is sent: neither the list nor its property list
    /// exists whole in memory, the writing overlaps the transfer, and changes made meanwhile go
    /// on. The size the resource announces is the store's, or, the first time, measured in a
    /// pass over the rows first. A list with a title only Foundation's writer can write is
    /// encoded whole.
    public func dump() async throws(ListrError) -> (source: ResourceSource, size: Int64) {
        let dump = try await store.dump()
        if let pieces = try ItemPropertyListPieces.make(rows: dump.rows, count: dump.count, itemsLength: dump.itemsLength) {
            if dump.itemsLength == nil { await store.remember(itemsLength: pieces.itemsLength, of: dump) }
            return (.chunks(pieces, size: Int64(pieces.size)), Int64(pieces.size))
        }
        // A title only Foundation can write: the same rows are encoded whole.
        var items: [Item] = []
        try dump.rows.forEach(after: 0) { row in
            items.append(Item(id: UUID(uuid: row.id), title: String(decoding: row.title, as: UTF8.self), done: row.done))
            return true
        }
        do {
            let data = try ItemPropertyList.encode(items)
            return (.bytes(data), Int64(data.count))
        } catch let error as ListrError {
            throw error
        } catch {
            throw .invalidPropertyList(reason: "the list could not be encoded (\(error))")
        }
    }

    /// Validates the property list, then replaces the whole list with it.
    public func handle(_ command: ReplaceDatabaseCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            // The store checks the list's rules (unique ids, valid titles) itself.
            guard let data = command.data else {
                throw ListrError.invalidPropertyList(reason: "the command carries no list (and no upload of one was found)")
            }
            let items = try ItemPropertyList.decode(data, checkingRules: false)
            try await store.replace(with: items, by: sender.name)
            return .message("Replaced the list with \(items.count) item\(items.count == 1 ? "" : "s").")
        }
    }

    /// Subscribes the sender to every later change; answers the current list as a property list,
    /// or its first page when the list is larger than ``maximumAnswerBytes`` (the client reads the
    /// rest with structured ``ListItemsCommand`` pages).
    public func handle(_ command: WatchCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let watchers = watchers
            let items = try await store.snapshot(maximumBytes: maximumAnswerBytes, measure: Self.propertyListBytes) { () throws(ListrError) in
                try watchers.add(sender)
            }
            return try Self.propertyList(items)
        }
    }

    /// Answers the settings as a JSON object.
    public func handle(_ command: GetSettingsCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in try Self.json(try await store.settings) }
    }

    /// Changes one setting; answers `Set item-limit to 500.`
    public func handle(_ command: SetSettingCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let settings = try await store.updateSettings(by: sender.name) { settings throws(ListrError) in
                try settings.set(command.key, to: command.value)
            }
            let value = ListrSettings.Key(rawValue: command.key).map(settings.value(of:)) ?? command.value
            return .message("Set \(command.key) to \(Self.quote(value)).")
        }
    }

    /// Puts every setting back to its default.
    public func handle(_ command: ResetSettingsCommand, from sender: Peer) async -> CLIResponse {
        await answer { () throws(ListrError) in
            let settings = try await store.updateSettings(by: sender.name) { $0 = .defaults }
            let text = ListrSettings.Key.allCases.map { "\($0.rawValue) \(Self.quote(settings.value(of: $0)))" }
            return .message("Reset the settings to their defaults: \(text.joined(separator: ", ")).")
        }
    }

    private func answer(_ body: () async throws(ListrError) -> CLIResponse) async -> CLIResponse {
        do {
            return try await body()
        } catch {
            return .error(error.description)
        }
    }

    private static func propertyList(_ items: [Item]) throws(ListrError) -> CLIResponse {
        do {
            return .data(try ItemPropertyList.encode(items))
        } catch {
            throw .invalidPropertyList(reason: "the list could not be encoded (\(error))")
        }
    }

    private static func json(_ settings: ListrSettings) throws(ListrError) -> CLIResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        do {
            return .data(try encoder.encode(settings))
        } catch {
            throw .invalidSetting(key: "settings", value: "\(settings)", reason: "they could not be encoded (\(error))")
        }
    }

    private static func quote(_ title: String) -> String {
        "\"\(title)\""
    }
}
