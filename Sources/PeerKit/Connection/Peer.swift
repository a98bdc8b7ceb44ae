/// A remote transceiver of the same service type.
///
/// A `Peer` is a snapshot: ``isConnected`` tells whether it was connected when the value was
/// made. Two `Peer` values are equal when their ``id``s are.
public struct Peer: Hashable, Identifiable, Sendable, CustomStringConvertible {
    /// The peer's fields, behind one reference: a `Peer` goes with every message received (to the
    /// dispatcher, then to the handler), and copying it costs one retain instead of one per field.
    private final class Storage: Sendable {
        let id: String
        let name: String
        let discoveryInfo: [String: String]
        let isConnected: Bool
        let fingerprint: String?

        init(id: String, name: String, discoveryInfo: [String: String], isConnected: Bool, fingerprint: String?) {
            self.id = id
            self.name = name
            self.discoveryInfo = discoveryInfo
            self.isConnected = isConnected
            self.fingerprint = fingerprint
        }
    }

    private let storage: Storage

    /// The peer's ID, taken from its handshake (or its `peerid` TXT record before that).
    public var id: String { storage.id }
    /// The peer's display name.
    public var name: String { storage.name }
    /// The key/value pairs the peer advertises (its DNS-SD TXT record or its hello).
    public var discoveryInfo: [String: String] { storage.discoveryInfo }
    /// Whether a connection to the peer was established when this value was made.
    public var isConnected: Bool { storage.isConnected }
    /// In ``PeerSecurity/certificates(_:trust:)`` mode, the SHA-256 fingerprint of the public key
    /// of the certificate the peer presented, verified by the TLS handshake (and equal to ``id``);
    /// nil in the other modes and for a peer not yet connected.
    public var fingerprint: String? { storage.fingerprint }

    /// Creates a peer value.
    public init(id: String, name: String, discoveryInfo: [String: String] = [:], isConnected: Bool, fingerprint: String? = nil) {
        storage = Storage(id: id, name: name, discoveryInfo: discoveryInfo, isConnected: isConnected, fingerprint: fingerprint)
    }

    /// Two values are the same peer when their peer IDs are equal, whatever their other fields say.
    public static func == (lhs: Peer, rhs: Peer) -> Bool { lhs.id == rhs.id }
    /// Hashes the peer ID only, as ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// `peer "Kitchen" (5F0C…)`, with control characters in the name escaped (it comes from the network).
    public var description: String { "peer \"\(LogSafe.text(name, maximumBytes: 80))\" (\(LogSafe.text(id, maximumBytes: 64)))" }
}
