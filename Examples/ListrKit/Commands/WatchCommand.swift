import PeerKit

/// Subscribes the sender to the list's changes. Answered with data, the current list as a
/// property list in the dump format; from then on listrd sends the sender a ``ListrChange`` for
/// every change, until it disconnects (or a ``WatchEndedEvent`` says why it stopped).
///
/// Wire key `"WatchCommand"`, payload `{}`.
public struct WatchCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"WatchCommand"`.
    public static let messageType = "WatchCommand"

    /// Creates the command.
    public init() {}
}
