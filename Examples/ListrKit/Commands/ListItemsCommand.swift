import PeerKit

/// Asks for the list, or one page of it, one line per item in insertion order: `[ ] title` or
/// `[✓] title`. Answered with a message; with `structured`, with data: the page as a property list
/// in the dump format.
///
/// Wire key `"ListItemsCommand"`, payload `{}` for the whole list, or e.g.
/// `{"limit":20,"offset":40,"structured":true}`.
public struct ListItemsCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"ListItemsCommand"`.
    public static let messageType = "ListItemsCommand"

    /// The most items to answer; nil for all of them from `offset` on.
    public var limit: Int?
    /// How many items to skip first; nil for none.
    public var offset: Int?
    /// Whether to answer with the page as a property list (for `item list --json`) instead of lines.
    public var structured: Bool?

    /// Creates the command.
    public init(limit: Int? = nil, offset: Int? = nil, structured: Bool? = nil) {
        self.limit = limit
        self.offset = offset
        self.structured = structured
    }
}
