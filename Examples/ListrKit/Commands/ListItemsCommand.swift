import PeerKit

/// Asks for the list, one line per item in insertion order: `[ ] title` or `[✓] title`. Answered with a
/// message.
///
/// Wire key `"ListItemsCommand"`, payload `{}`.
public struct ListItemsCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"ListItemsCommand"`.
    public static let messageType = "ListItemsCommand"

    /// Creates the command.
    public init() {}
}
