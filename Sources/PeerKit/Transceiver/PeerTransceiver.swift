import Logging
import NIOCore

// SKELETON: signatures of the public API; bodies land with the core commit.

/// Finds peers of one service type, connects to them, and exchanges typed `Codable` messages.
public final class PeerTransceiver: Sendable {
    /// The configuration the transceiver was made with.
    public let configuration: PeerConfiguration
    /// This transceiver's peer ID, sent in its hello and advertised as `peerid`.
    public let peerID: String

    /// Creates a transceiver for `serviceType` with the default configuration.
    public convenience init(serviceType: String) {
        self.init(configuration: PeerConfiguration(serviceType: serviceType))
    }

    /// Creates a transceiver. Nothing happens until ``resume()`` or ``start()``.
    public init(configuration: PeerConfiguration) {
        self.configuration = configuration
        self.peerID = "skeleton"
    }

    /// Starts listening, advertising and browsing; returns once listening. Throws ``PeerKitError``.
    public func start() async throws { fatalError("skeleton") }
    /// Starts in the background; problems are reported as ``PeerEvent/error(_:)`` and logged.
    public func resume() { fatalError("skeleton") }
    /// Says bye to every peer, closes every connection, stops discovery.
    public func stop() { fatalError("skeleton") }

    /// The TCP port the transceiver listens on, once started.
    public var listeningPort: Int? { fatalError("skeleton") }
    /// Peers currently available (discovered or connected).
    public var availablePeers: [Peer] { fatalError("skeleton") }
    /// Peers currently connected.
    public var connectedPeers: [Peer] { fatalError("skeleton") }

    /// Called when a peer becomes available.
    public var peerAdded: @Sendable (Peer) -> Void { get { fatalError() } set { fatalError() } }
    /// Called when a peer is no longer available.
    public var peerRemoved: @Sendable (Peer) -> Void { get { fatalError() } set { fatalError() } }
    /// Called when a peer is connected.
    public var peerConnected: @Sendable (Peer) -> Void { get { fatalError() } set { fatalError() } }
    /// Called when a peer is disconnected.
    public var peerDisconnected: @Sendable (Peer) -> Void { get { fatalError() } set { fatalError() } }
    /// Called with the new list whenever the available peers change.
    public var availablePeersDidChange: @Sendable ([Peer]) -> Void { get { fatalError() } set { fatalError() } }

    /// A new stream of everything that happens from now on.
    public func events() -> AsyncStream<PeerEvent> { fatalError("skeleton") }
    /// Waits until a peer (matching `predicate`) is connected; throws ``PeerKitError/noPeerFound(serviceType:timeout:)``
    /// after `timeout`, or the discovery error at once when discovery cannot work.
    public func waitForPeer(timeout: Duration, where predicate: @escaping @Sendable (Peer) -> Bool = { _ in true }) async throws -> Peer { fatalError("skeleton") }

    /// Registers `handler` for messages of type `T`, replacing any earlier handler for its wire key.
    public func receive<T: Decodable>(_ type: T.Type, using handler: @escaping @Sendable (T) async -> Void) { fatalError("skeleton") }
    /// Registers `handler` for messages of type `T`; `sender` is the peer of the connection it came on.
    public func receive<T: Decodable>(_ type: T.Type, using handler: @escaping @Sendable (T, Peer) async -> Void) { fatalError("skeleton") }
    /// Registers a request handler whose return value is sent back to the requester only.
    public func respond<T: Decodable, R: Encodable>(to type: T.Type, using handler: @escaping @Sendable (T, Peer) async throws -> R) { fatalError("skeleton") }
    /// Sends `payload` to every connected peer, fire and forget.
    public func broadcast<T: Encodable>(_ payload: T) { fatalError("skeleton") }
    /// Sends `payload` to `peers`; throws ``PeerKitError/peerNotConnected(peer:)`` for a peer that is not connected.
    public func send<T: Encodable>(_ payload: T, to peers: [Peer]) async throws { fatalError("skeleton") }
    /// Sends `payload` to `peer` and waits for its reply of type `R`.
    public func request<T: Encodable, R: Decodable>(_ payload: T, to peer: Peer, expecting: R.Type, timeout: Duration = .seconds(5)) async throws -> R { fatalError("skeleton") }
}
