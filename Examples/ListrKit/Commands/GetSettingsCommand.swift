import PeerKit

/// Asks for listrd's settings. Answered with data: the ``ListrSettings`` as a JSON object.
///
/// Wire key `"GetSettingsCommand"`, payload `{}`.
public struct GetSettingsCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"GetSettingsCommand"`.
    public static let messageType = "GetSettingsCommand"

    /// Creates the command.
    public init() {}
}
