import PeerKit

/// Adds an item at the end of the list. Answered with a message.
///
/// Wire key `"AddItemCommand"`, payload `{"title":"Milk"}`.
public struct AddItemCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"AddItemCommand"`.
    public static let messageType = "AddItemCommand"

    /// What is to be done.
    public var title: String

    /// Creates the command.
    public init(title: String) {
        self.title = title
    }
}
