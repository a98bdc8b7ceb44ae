/// How a transceiver protects its connections: ``PeerConfiguration/security``.
///
/// ```swift
/// configuration.security = .preSharedKey(try PeerKey(contentsOfFile: "/etc/myapp/key"))
/// // or, each peer with its own key pair:
/// configuration.security = .certificates(
///     try PeerIdentity(certificateFile: "me.pem", keyFile: "me.key"),
///     trust: try .pinned(["3f5a…", "91c0…"])
/// )
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
    /// Mutual TLS 1.3: each peer has its own key pair and certificate (``PeerIdentity``) and
    /// accepts only peers that `trust` names (pinned public-key fingerprints, or certificate
    /// authorities). A peer's ID is the SHA-256 fingerprint of its public key, checked against the
    /// certificate it presented, so nobody can claim another peer's ID; ``Peer/fingerprint`` is set.
    case certificates(PeerIdentity, trust: PeerTrust)

    /// The mode's name in the `sec` TXT key: `none`, `psk` or `cert`.
    public var txtValue: String {
        switch self {
        case .none: return "none"
        case .preSharedKey: return "psk"
        case .certificates: return "cert"
        }
    }

    /// The mode in words, naming a key only by its key id or fingerprint.
    public var description: String {
        switch self {
        case .none: return "no security (plaintext)"
        case let .preSharedKey(key): return "TLS with \(key)"
        case let .certificates(identity, trust): return "mutual TLS 1.3 with \(identity), trusting \(trust)"
        }
    }

    /// The peer ID this mode binds the transceiver to (its key's fingerprint), or nil when any ID will do.
    var boundPeerID: String? {
        if case let .certificates(identity, _) = self { return identity.fingerprint }
        return nil
    }
}
