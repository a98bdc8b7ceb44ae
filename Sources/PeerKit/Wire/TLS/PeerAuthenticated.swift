/// The user inbound event the TLS handlers fire in certificates mode once the handshake verified
/// the peer's certificate: the connection handler then requires the hello's peer ID to be this
/// fingerprint (see ``ConnectionStateMachine/peerAuthenticated(fingerprint:)``).
struct PeerAuthenticated: Sendable, Equatable {
    /// The SHA-256 fingerprint of the peer's certificate public key (see ``PeerIdentity/fingerprint``).
    var fingerprint: String
}
