import PeerKit

/// Asks for the whole list as an XML property list (an array of dicts with the keys `id`, `title` and
/// `done`). Answered with data.
///
/// Wire key `"DumpDatabaseCommand"`, payload `{}`.
public struct DumpDatabaseCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"DumpDatabaseCommand"`.
    public static let messageType = "DumpDatabaseCommand"

    /// Creates the command.
    public init() {}
}
