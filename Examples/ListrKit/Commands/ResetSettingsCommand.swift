import PeerKit

/// Puts every setting back to its default (``ListrSettings/defaults``). Answered with a message.
///
/// Wire key `"ResetSettingsCommand"`, payload `{}`.
public struct ResetSettingsCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"ResetSettingsCommand"`.
    public static let messageType = "ResetSettingsCommand"

    /// Creates the command.
    public init() {}
}
