/// A remote transceiver of the same service type.
///
/// A `Peer` is a snapshot: ``isConnected`` tells whether it was connected when the value was
/// made. Two `Peer` values are equal when their ``id``s are.
public struct Peer: Hashable, Identifiable, Sendable, CustomStringConvertible {
    /// The peer's ID, taken from its handshake (or its `peerid` TXT record before that).
    public let id: String
    /// The peer's display name.
    public let name: String
    /// The key/value pairs the peer advertises (its DNS-SD TXT record or its hello).
    public let discoveryInfo: [String: String]
    /// Whether a connection to the peer was established when this value was made.
    public let isConnected: Bool
    /// In ``PeerSecurity/certificates(_:trust:)`` mode, the SHA-256 fingerprint of the public key
    /// of the certificate the peer presented, verified by the TLS handshake (and equal to ``id``);
    /// nil in the other modes and for a peer not yet connected.
    public let fingerprint: String?

    /// Creates a peer value.
    public init(id: String, name: String, discoveryInfo: [String: String] = [:], isConnected: Bool, fingerprint: String? = nil) {
        self.id = id
        self.name = name
        self.discoveryInfo = discoveryInfo
        self.isConnected = isConnected
        self.fingerprint = fingerprint
    }

    /// Two values are the same peer when their peer IDs are equal, whatever their other fields say.
    public static func == (lhs: Peer, rhs: Peer) -> Bool { lhs.id == rhs.id }
    /// Hashes the peer ID only, as ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// `peer "Kitchen" (5F0C…)`, with control characters in the name escaped (it comes from the network).
    public var description: String { "peer \"\(LogSafe.text(name, maximumBytes: 80))\" (\(LogSafe.text(id, maximumBytes: 64)))" }
}
