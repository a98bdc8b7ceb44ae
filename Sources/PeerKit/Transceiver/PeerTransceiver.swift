import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// Finds peers of one service type on the local network, connects to them, and exchanges typed
/// `Codable` messages with them.
///
/// ```swift
/// import PeerKit
///
/// struct SomeCodableThing: Codable { let text: String }
///
/// // Create a transceiver (make sure you store it somewhere, like a property)
/// let transceiver = PeerTransceiver(serviceType: "example")
///
/// // Start it up!
/// transceiver.resume()
///
/// // Configure message receivers
/// transceiver.receive(SomeCodableThing.self) { payload in
///     print("Got my thing! \(payload)")
/// }
///
/// // Broadcast message to peers
/// transceiver.broadcast(SomeCodableThing(text: "hello"))
/// ```
///
/// A transceiver advertises itself (unless ``PeerConfiguration/advertises`` is false), browses for
/// peers of its service type, connects to each, and keeps exactly one connection per peer. Peers of
/// other service types are never connected. Handlers registered with ``receive(_:using:)-(_,(T,Peer)->Void)``
/// and ``respond(to:using:)`` run one at a time, in the order messages arrived, off the event loops.
public final class PeerTransceiver: Sendable {
    /// The configuration the transceiver was made with.
    public let configuration: PeerConfiguration
    /// This transceiver's peer ID, sent in its hello and advertised in the `peerid` TXT key.
    public let peerID: String

    let registry = MessageRegistry()
    let pending = PendingRequests()
    let hub = PeerEventHub()
    /// ``PeerConfiguration/clock``, read by every timer of the transceiver.
    let clock: PeerClock
    private let requestCounter = Atomic<UInt64>(0)
    private let lifecycle = NIOLockedValueBox(Lifecycle.idle)

    private enum Lifecycle {
        case idle
        case starting(TransceiverSession)
        case running(TransceiverSession)
    }

    var logger: Logger { configuration.logger }

    /// Creates a transceiver for `serviceType` with the default configuration.
    ///
    /// An invalid service type is reported when the transceiver starts: ``start()`` throws
    /// ``PeerKitError/invalidServiceType(_:reason:)`` and ``resume()`` publishes it as an error event.
    public convenience init(serviceType: String) {
        self.init(configuration: PeerConfiguration(serviceType: serviceType))
    }

    /// Creates a transceiver. Nothing happens until ``resume()`` or ``start()``.
    public init(configuration: PeerConfiguration) {
        self.configuration = configuration
        self.clock = PeerClock(configuration.clock)
        self.peerID = UUID().uuidString
    }

    deinit {
        stop()
        hub.finish()
    }

    // MARK: Lifecycle

    /// Starts listening, advertising and browsing, and returns once the transceiver listens.
    ///
    /// Calling it while the transceiver runs does nothing.
    /// - Throws: ``PeerKitError/invalidServiceType(_:reason:)``, ``PeerKitError/invalidDiscoveryInfo(key:reason:)``
    ///   or ``PeerKitError/listenFailed(address:reason:)``. Discovery problems (such as a missing
    ///   avahi-daemon) do not throw: they arrive as ``PeerEvent/error(_:)`` and make
    ///   ``waitForPeer(timeout:where:)`` throw.
    public func start() async throws {
        guard let session = try beginStart() else { return }
        try await finishStart(session)
    }

    /// Starts the transceiver in the background, like ``start()``.
    ///
    /// The transceiver counts as running as soon as this returns: a ``broadcast(_:)`` right after
    /// it is not an error (it reaches the peers connected by then, which is none yet).
    /// Problems are logged and published as ``PeerEvent/error(_:)``.
    public func resume() {
        let session: TransceiverSession?
        do {
            session = try beginStart()
        } catch {
            logger.error("\(error)")
            hub.publish(.error(error))
            return
        }
        guard let session else { return }
        Task {
            do {
                try await self.finishStart(session)
            } catch {
                let error = error as? PeerKitError ?? .listenFailed(address: self.configuration.listenHost, reason: "\(error)")
                self.logger.error("\(error)")
                self.hub.publish(.error(error))
            }
        }
    }

    /// Validates the configuration and makes the session, synchronously; nil when already running.
    private func beginStart() throws(PeerKitError) -> TransceiverSession? {
        try configuration.validate()
        let security = try WireSecurity(security: configuration.security, serviceType: configuration.serviceType)
        let session = lifecycle.withLockedValue { lifecycle -> TransceiverSession? in
            guard case .idle = lifecycle else { return nil }
            let session = TransceiverSession(configuration: configuration, clock: clock, security: security, peerID: peerID, registry: registry, pending: pending, hub: hub)
            lifecycle = .starting(session)
            return session
        }
        if session != nil { hub.startCallbackTask() }
        return session
    }

    /// Listens and starts discovery for a session made by ``beginStart()``.
    private func finishStart(_ session: TransceiverSession) async throws {
        let port: Int?
        do {
            port = try await session.start()
        } catch {
            session.stop()
            lifecycle.withLockedValue { lifecycle in
                if case let .starting(current) = lifecycle, current === session { lifecycle = .idle }
            }
            throw error
        }
        let stillWanted = lifecycle.withLockedValue { lifecycle -> Bool in
            guard case let .starting(current) = lifecycle, current === session else { return false }
            lifecycle = .running(session)
            return true
        }
        guard stillWanted else {
            session.stop()
            return
        }
        if case .none = configuration.security {
            logger.warning("PeerKit traffic of \"\(configuration.serviceType)\" is neither authenticated nor encrypted (PeerConfiguration.security is .none): anyone on the network can read and send messages. Set security = .preSharedKey(...) to protect it.")
        }
        logger.info("PeerKit transceiver \"\(configuration.peerName)\" started for service type \"\(configuration.serviceType)\"\(port.map { " on port \($0)" } ?? " (not listening)").")
        hub.publish(.started(port: port ?? 0))
    }

    /// Says bye to every peer, closes every connection, and stops advertising and browsing.
    ///
    /// Requests waiting for replies fail with ``PeerKitError/notRunning``. The transceiver can be
    /// started again. The byes are sent in the background; a program about to exit calls
    /// ``shutdown()`` instead, which waits for them.
    public func stop() {
        _ = stopSession()
    }

    /// Stops like ``stop()`` and returns once every peer has been sent its bye and every
    /// connection is closed (at most about a second for a peer that does not read).
    public func shutdown() async {
        for closed in stopSession() {
            try? await closed.get()
        }
    }

    private func stopSession() -> [EventLoopFuture<Void>] {
        let session = lifecycle.withLockedValue { lifecycle -> TransceiverSession? in
            switch lifecycle {
            case .idle:
                return nil
            case let .starting(session), let .running(session):
                lifecycle = .idle
                return session
            }
        }
        guard let session else { return [] }
        let closed = session.stop()
        pending.failAll(with: PeerKitError.notRunning)
        hub.publishStopped()
        return closed
    }

    /// The session while the transceiver runs (or starts).
    var session: TransceiverSession? {
        lifecycle.withLockedValue { lifecycle in
            switch lifecycle {
            case .idle: return nil
            case let .starting(session), let .running(session): return session
            }
        }
    }

    func runningSession() throws -> TransceiverSession {
        guard let session else { throw PeerKitError.notRunning }
        return session
    }

    func nextRequestID() -> String {
        String(requestCounter.add(1, ordering: .relaxed).newValue)
    }

    // MARK: State

    /// The TCP port the transceiver listens on, once started; nil when not listening.
    public var listeningPort: Int? { session?.port }

    /// Peers currently available: discovered, or connected to this transceiver. Sorted by name.
    public var availablePeers: [Peer] { session?.manager.availablePeers() ?? [] }

    /// Peers currently connected. Sorted by name.
    public var connectedPeers: [Peer] { session?.manager.connectedPeers() ?? [] }
}
