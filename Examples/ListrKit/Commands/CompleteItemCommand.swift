import PeerKit

/// Marks the item at a 1-based position as done. Answered with a message, or an error when there is no such
/// item.
///
/// Wire key `"CompleteItemCommand"`, payload `{"index":2}`.
public struct CompleteItemCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"CompleteItemCommand"`.
    public static let messageType = "CompleteItemCommand"

    /// The item's 1-based position, as `listrctl item list` shows it.
    public var index: Int

    /// Creates the command.
    public init(index: Int) {
        self.index = index
    }
}
