// Codes about security: keys, identities, TLS, and peers refused for who they are.
// To add a code, see "Adding a code" in PeerKitError.swift.

extension PeerKitError.Code {
    /// A ``PeerKey`` could not be made (wrong length, unreadable key file, empty passphrase).
    public static let invalidKey = Self("invalidKey")
    /// The TLS contexts for ``PeerConfiguration/security`` could not be built.
    public static let securitySetupFailed = Self("securitySetupFailed")
    /// A peer that holds another pre-shared key tried to connect, or was dialled; closed during the
    /// TLS handshake, before anything was read from it.
    public static let keyMismatch = Self("keyMismatch")
    /// A peer spoke plaintext to this TLS transceiver (or answered its dial in plaintext); closed
    /// before anything it sent was read.
    public static let plaintextPeer = Self("plaintextPeer")
    /// A peer spoke TLS to this plaintext transceiver; closed before anything it sent was read.
    public static let tlsPeer = Self("tlsPeer")
    /// The peer uses TLS, but another security mode (or TLS version, or cipher suite) than this one.
    public static let securityModeMismatch = Self("securityModeMismatch")
    /// The TLS handshake with a peer failed for another reason.
    public static let securityHandshakeFailed = Self("securityHandshakeFailed")
    /// Discovery found a peer that advertises another security mode or key id; it is not dialled.
    public static let advertisedSecurityMismatch = Self("advertisedSecurityMismatch")
    /// The admission hook (``PeerConfiguration/admission``) refused a peer; its connection was closed.
    public static let admissionRefused = Self("admissionRefused")
    /// In certificates mode, a peer's hello claimed a peer ID that is not its certificate's public-key fingerprint; closed before any message of it was dispatched.
    public static let peerIDNotBound = Self("peerIDNotBound")
    /// In certificates mode, the peer refused our certificate (it does not trust our key); closed during the TLS handshake.
    public static let certificateRefused = Self("certificateRefused")
    /// In certificates mode, a peer presented a certificate whose public key is neither pinned nor signed by a trusted CA; closed during the TLS handshake, before anything was read from it.
    public static let certificateNotTrusted = Self("certificateNotTrusted")
    /// A ``PeerIdentity`` or ``PeerTrust`` could not be made (unreadable or malformed PEM, a key that is not the certificate's, a key file others can read, a malformed fingerprint).
    public static let invalidIdentity = Self("invalidIdentity")
}

extension PeerKitError {
    /// A ``PeerKey`` could not be made (wrong length, unreadable key file, empty passphrase).
    public static func invalidKey(reason: String) -> PeerKitError {
        PeerKitError(.invalidKey, ["reason": .text(reason)],
                     "The pre-shared key cannot be used: \(reason). Make a key with PeerKey.random() (32 random bytes) and give every peer the same one.")
    }

    /// The TLS contexts for ``PeerConfiguration/security`` could not be built.
    public static func securitySetupFailed(reason: String) -> PeerKitError {
        PeerKitError(.securitySetupFailed, ["reason": .text(reason)],
                     "Security cannot be set up: \(reason).")
    }

    /// A peer that holds another pre-shared key tried to connect, or was dialled; closed during the
    /// TLS handshake, before anything was read from it.
    public static func keyMismatch(peer: String, ourKeyID: String, detail: String) -> PeerKitError {
        PeerKitError(.keyMismatch, ["peer": .text(peer), "ourKeyID": .text(ourKeyID), "detail": .text(detail)],
                     "\(peer.capitalizedFirst) does not share our pre-shared key: \(detail). Our key id is \(ourKeyID); give both sides the same key. The connection was closed before anything was read from it.",
                     isSecurityRefusal: true)
    }

    /// A peer spoke plaintext to this TLS transceiver (or answered its dial in plaintext); closed
    /// before anything it sent was read.
    public static func plaintextPeer(peer: String, security: String) -> PeerKitError {
        PeerKitError(.plaintextPeer, ["peer": .text(peer), "security": .text(security)],
                     "\(peer.capitalizedFirst) speaks plaintext, and this transceiver requires TLS (security \(security)). Configure the same PeerConfiguration.security on both sides. The connection was closed before anything was read from it.",
                     isSecurityRefusal: true)
    }

    /// A peer spoke TLS to this plaintext transceiver; closed before anything it sent was read.
    public static func tlsPeer(peer: String) -> PeerKitError {
        PeerKitError(.tlsPeer, ["peer": .text(peer)],
                     "\(peer.capitalizedFirst) speaks TLS, and this transceiver has security .none (plaintext). Configure the same PeerConfiguration.security (and key) on both sides. The connection was closed before anything was read from it.",
                     isSecurityRefusal: true)
    }

    /// The peer uses TLS, but another security mode (or TLS version, or cipher suite) than this one.
    public static func securityModeMismatch(peer: String, ours: String, detail: String) -> PeerKitError {
        PeerKitError(.securityModeMismatch, ["peer": .text(peer), "ours": .text(ours), "detail": .text(detail)],
                     "\(peer.capitalizedFirst) uses another security mode than ours (\(ours)): \(detail). Configure the same PeerConfiguration.security on both sides.",
                     isSecurityRefusal: true)
    }

    /// The TLS handshake with a peer failed for another reason.
    public static func securityHandshakeFailed(peer: String, reason: String) -> PeerKitError {
        PeerKitError(.securityHandshakeFailed, ["peer": .text(peer), "reason": .text(reason)],
                     "The TLS handshake with \(peer) failed: \(reason).",
                     isSecurityRefusal: true)
    }

    /// Discovery found a peer that advertises another security mode or key id; it is not dialled.
    public static func advertisedSecurityMismatch(service: String, theirs: String, ours: String) -> PeerKitError {
        PeerKitError(.advertisedSecurityMismatch, ["service": .text(service), "theirs": .text(theirs), "ours": .text(ours)],
                     "The service \"\(service)\" advertises security \(theirs), and ours is \(ours), so it is not dialled. Give both sides the same PeerConfiguration.security and key.",
                     isSecurityRefusal: true)
    }

    /// The admission hook (``PeerConfiguration/admission``) refused a peer; its connection was closed.
    public static func admissionRefused(peer: String) -> PeerKitError {
        PeerKitError(.admissionRefused, ["peer": .text(peer)],
                     "The admission hook refused \(peer); its connection was closed.",
                     isSecurityRefusal: true)
    }

    /// In certificates mode, a peer's hello claimed a peer ID that is not its certificate's public-key fingerprint; closed before any message of it was dispatched.
    public static func peerIDNotBound(peer: String, claimed: String, fingerprint: String) -> PeerKitError {
        PeerKitError(.peerIDNotBound, ["peer": .text(peer), "claimed": .text(claimed), "fingerprint": .text(fingerprint)],
                     "\(peer.capitalizedFirst) claimed the peer ID \"\(LogSafe.text(claimed, maximumBytes: 64))\", but \(ConnectionStateMachine.unboundPeerIDReason), and its key's fingerprint is \(fingerprint); a certificate of one peer cannot be used to pose as another. The connection was closed before any of its messages was dispatched.",
                     isSecurityRefusal: true)
    }

    /// In certificates mode, the peer refused our certificate (it does not trust our key); closed during the TLS handshake.
    public static func certificateRefused(peer: String, ourFingerprint: String, detail: String) -> PeerKitError {
        PeerKitError(.certificateRefused, ["peer": .text(peer), "ourFingerprint": .text(ourFingerprint), "detail": .text(detail)],
                     "\(peer.capitalizedFirst) refused our certificate (\(detail)): it does not trust our public key, fingerprint \(ourFingerprint). Pin that fingerprint on the peer, or have our certificate signed by a CA it trusts. The connection was closed before anything was read from it.",
                     isSecurityRefusal: true)
    }

    /// In certificates mode, a peer presented a certificate whose public key is neither pinned nor signed by a trusted CA; closed during the TLS handshake, before anything was read from it.
    public static func certificateNotTrusted(peer: String, fingerprint: String?, reason: String) -> PeerKitError {
        guard let fingerprint else {
            return PeerKitError(.certificateNotTrusted, ["peer": .text(peer), "reason": .text(reason)],
                                "\(peer.capitalizedFirst) is not trusted: \(reason). In certificates mode every peer presents a certificate whose key is pinned (PeerTrust.pinned) or signed by a CA in PeerTrust.certificateAuthorities. The connection was closed before anything was read from it.",
                                isSecurityRefusal: true)
        }
        return PeerKitError(.certificateNotTrusted, ["peer": .text(peer), "fingerprint": .text(fingerprint), "reason": .text(reason)],
                            "\(peer.capitalizedFirst) presented a certificate whose public key has the fingerprint \(fingerprint), which we do not trust: \(reason). If this peer is yours, pin that fingerprint (PeerTrust.pinned) or have its certificate signed by a CA in PeerTrust.certificateAuthorities. The connection was closed before anything was read from it.",
                            isSecurityRefusal: true)
    }

    /// A ``PeerIdentity`` or ``PeerTrust`` could not be made (unreadable or malformed PEM, a key that is not the certificate's, a key file others can read, a malformed fingerprint).
    public static func invalidIdentity(reason: String) -> PeerKitError {
        PeerKitError(.invalidIdentity, ["reason": .text(reason)],
                     "The certificate identity or trust cannot be used: \(reason). Make an identity with PeerIdentity.generate() (or `peerkit identity create PATH`) and pin its fingerprint on the other peers.")
    }

    /// The `ourKeyID` the sentence names, for the codes that have one (`keyMismatch`); nil for the others.
    public var ourKeyID: String? { text("ourKeyID") }

    /// The `detail` the sentence names, for the codes that have one (`keyMismatch`, `securityModeMismatch`, `certificateRefused`); nil for the others.
    public var detail: String? { text("detail") }

    /// The `security` the sentence names, for the codes that have one (`plaintextPeer`); nil for the others.
    public var security: String? { text("security") }

    /// The `ours` the sentence names, for the codes that have one (`securityModeMismatch`, `advertisedSecurityMismatch`); nil for the others.
    public var ours: String? { text("ours") }

    /// The `service` the sentence names, for the codes that have one (`advertisedSecurityMismatch`); nil for the others.
    public var service: String? { text("service") }

    /// The `theirs` the sentence names, for the codes that have one (`advertisedSecurityMismatch`); nil for the others.
    public var theirs: String? { text("theirs") }

    /// The `claimed` the sentence names, for the codes that have one (`peerIDNotBound`); nil for the others.
    public var claimed: String? { text("claimed") }

    /// The `ourFingerprint` the sentence names, for the codes that have one (`certificateRefused`); nil for the others.
    public var ourFingerprint: String? { text("ourFingerprint") }

    /// The `fingerprint` the sentence names, for the codes that have one (`certificateNotTrusted`, `peerIDNotBound`); nil for the others.
    public var fingerprint: String? { text("fingerprint") }
}
