import PeerKit

/// One change to the list or the settings, as listrd pushes it to every watcher.
///
/// Wire key `"ListrChangeEvent"`, payload e.g.
/// `{"kind":"added","client":"listrctl 4242 on vm","index":3,"item":{"id":"…","title":"Milk","done":false}}`.
public struct ListrChange: Codable, Hashable, Sendable, PeerMessage {
    /// `"ListrChangeEvent"`.
    public static let messageType = "ListrChangeEvent"

    /// What happened.
    public enum Kind: String, Codable, Sendable {
        /// An item was added at `index`.
        case added
        /// The item at `index` was marked as done.
        case done
        /// The item at `index` was removed.
        case removed
        /// The whole list was replaced by `count` items.
        case replaced
        /// The settings changed to `settings`.
        case settings
    }

    /// What happened.
    public var kind: Kind
    /// The name of the client that made the change (its PeerKit peer name).
    public var client: String
    /// The item's 1-based position (before the change, for a removal).
    public var index: Int?
    /// The item as it is after the change (as it was, for a removal).
    public var item: Item?
    /// The number of items after a replace.
    public var count: Int?
    /// The settings after a settings change.
    public var settings: ListrSettings?

    /// Creates a change.
    public init(kind: Kind, client: String, index: Int? = nil, item: Item? = nil, count: Int? = nil, settings: ListrSettings? = nil) {
        self.kind = kind
        self.client = client
        self.index = index
        self.item = item
        self.count = count
        self.settings = settings
    }

    /// The change as a sentence, e.g. `listrctl 4242 on vm added "Milk" as item 3.`
    public var sentence: String {
        let title = item.map { "\"\($0.title)\"" } ?? "an item"
        switch kind {
        case .added: return "\(client) added \(title) as item \(index ?? 0)."
        case .done: return "\(client) marked item \(index ?? 0), \(title), as done."
        case .removed: return "\(client) removed item \(index ?? 0), \(title)."
        case .replaced:
            let count = count ?? 0
            return "\(client) replaced the list with \(count) item\(count == 1 ? "" : "s")."
        case .settings:
            let text = settings.map { settings in
                ListrSettings.Key.allCases.map { "\($0.rawValue) \(settings.value(of: $0))" }.joined(separator: ", ")
            } ?? "unknown"
            return "\(client) changed the settings: \(text)."
        }
    }
}
