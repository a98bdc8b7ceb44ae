import PeerKit

/// Changes one of listrd's settings; it applies at once, persists with the store and is
/// announced to watchers. Answered with a message, or an error for an unknown key or a value the
/// setting cannot take (nothing changes then).
///
/// Wire key `"SetSettingCommand"`, payload `{"key":"item-limit","value":"500"}`.
public struct SetSettingCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"SetSettingCommand"`.
    public static let messageType = "SetSettingCommand"

    /// The setting, as ``ListrSettings/Key`` spells it: `log-level`, `name` or `item-limit`.
    public var key: String
    /// The new value, as text.
    public var value: String

    /// Creates the command.
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
}
