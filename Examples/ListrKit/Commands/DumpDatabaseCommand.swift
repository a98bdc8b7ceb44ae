import PeerKit

/// Asks for the whole list as an XML property list (an array of dicts with the keys `id`, `title` and
/// `done`). Answered with data; with ``asResource``, answered with a message while the list follows
/// as the resource ``ListrResources/dump``, in chunks, however large it is.
///
/// Wire key `"DumpDatabaseCommand"`, payload `{}` or `{"asResource":true}`.
public struct DumpDatabaseCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"DumpDatabaseCommand"`.
    public static let messageType = "DumpDatabaseCommand"

    /// Send the list as a resource rather than in the answer (which must fit in one message).
    public var asResource: Bool?

    /// Creates the command.
    public init(asResource: Bool? = nil) {
        self.asResource = asResource
    }
}
