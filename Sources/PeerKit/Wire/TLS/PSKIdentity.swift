/// The PSK identity and identity hint PeerKit peers exchange in the TLS handshake.
///
/// Both are `peerkit-psk1:` followed by the key's ``PeerKey/keyID``: public, derived one-way from
/// the key, never the key. A server refuses a client whose identity names another key id, so that
/// both sides can say "the keys differ" rather than "the handshake failed".
enum PSKIdentity {
    /// What precedes the key id.
    static let prefix = "peerkit-psk1:"

    /// The identity (and hint) for `key`.
    static func identity(for key: PeerKey) -> String {
        prefix + key.keyID
    }

    /// The key id an identity names, or nil when it is not a PeerKit identity.
    static func keyID(of identity: String) -> String? {
        guard identity.hasPrefix(prefix) else { return nil }
        return String(identity.dropFirst(prefix.count))
    }
}
