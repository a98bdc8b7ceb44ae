import PeerKit

/// Tells a watcher that listrd stopped sending it changes, and why (it fell too far behind).
/// A watcher that wants to go on sends ``WatchCommand`` again and starts from the list it answers.
///
/// Wire key `"WatchEndedEvent"`, payload `{"reason":"…"}`.
public struct WatchEndedEvent: Codable, Hashable, Sendable, PeerMessage {
    /// `"WatchEndedEvent"`.
    public static let messageType = "WatchEndedEvent"

    /// Why, as a sentence.
    public var reason: String

    /// Creates the event.
    public init(reason: String) {
        self.reason = reason
    }
}
