import PeerKit

/// Removes the item at a 1-based position. Answered with a message, or an error when there is no such item.
///
/// Wire key `"RemoveItemCommand"`, payload `{"index":2}`.
public struct RemoveItemCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"RemoveItemCommand"`.
    public static let messageType = "RemoveItemCommand"

    /// The item's 1-based position, as `listrctl item list` shows it.
    public var index: Int

    /// Creates the command.
    public init(index: Int) {
        self.index = index
    }
}
