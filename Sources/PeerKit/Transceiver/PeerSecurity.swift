/// How a transceiver protects its connections: ``PeerConfiguration/security``.
///
/// ```swift
/// configuration.security = .preSharedKey(try PeerKey(contentsOfFile: "/etc/myapp/key"))
/// ```
///
/// Every peer of a service type must use the same mode (and, with a pre-shared key, the same
/// key): a connection between peers that do not agree is closed before any message is read, and
/// both sides say why. See Documentation/Security.md for what each mode protects.
public enum PeerSecurity: Sendable, CustomStringConvertible {
    /// Plaintext TCP, as PeerKit did before it had security: anyone on the network can read every
    /// message, send any message, and claim any peer ID. The transceiver says so in its log when it starts.
    case none
    /// TLS 1.2 with the ECDHE-PSK-CHACHA20-POLY1305 cipher suite: every peer holds the same
    /// ``PeerKey``. Messages are encrypted and authenticated, with forward secrecy; only holders of
    /// the key can connect. Every holder can claim any peer ID.
    case preSharedKey(PeerKey)

    /// The mode's name in the `sec` TXT key: `none` or `psk`.
    public var txtValue: String {
        switch self {
        case .none: return "none"
        case .preSharedKey: return "psk"
        }
    }

    /// The mode in words, naming a key only by its key id.
    public var description: String {
        switch self {
        case .none: return "no security (plaintext)"
        case let .preSharedKey(key): return "TLS with \(key)"
        }
    }
}
