import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle
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
public final class PeerTransceiver: Service, Sendable {
    /// The configuration the transceiver was made with.
    public let configuration: PeerConfiguration
    /// This transceiver's peer ID, sent in its hello and advertised in the `peerid` TXT key: a
    /// random UUID, or in ``PeerSecurity/certificates(_:trust:)`` mode its identity's
    /// ``PeerIdentity/fingerprint``.
    public let peerID: String

    let registry = MessageRegistry()
    let resourceRegistry = ResourceRegistry()
    let pending: PendingRequests
    let hub = PeerEventHub()
    /// Group membership: ours (kept across restarts) and that of connected peers.
    let groupDirectory: GroupDirectory
    /// The transceiver's metrics, kept across restarts.
    let metrics: PeerMetrics
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
        self.pending = PendingRequests(clock: clock)
        self.peerID = configuration.security.boundPeerID ?? UUID().uuidString
        self.groupDirectory = GroupDirectory(limits: .init(
            maximumGroupNameLength: configuration.maximumGroupNameLength,
            maximumGroupsPerPeer: configuration.maximumGroupsPerPeer
        ))
        self.metrics = PeerMetrics(factory: configuration.metricsFactory)
    }

    deinit {
        stop()
        hub.finish()
    }

    // MARK: Lifecycle

    /// Runs the transceiver until it is stopped: listens, advertises and browses, then handles
    /// messages, events and closures, and returns once every peer has been sent its bye.
    ///
    /// This is the structured form of the lifecycle, and makes the transceiver a
    /// swift-service-lifecycle `Service`: everything the transceiver does while it runs is a
    /// child task of this call. It ends when ``stop()`` is called, when the task running it is
    /// cancelled, or when the `ServiceGroup` it runs in shuts down gracefully.
    ///
    /// ```swift
    /// let transceiver = PeerTransceiver(serviceType: "example")
    /// let group = ServiceGroup(services: [transceiver], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    /// try await group.run()
    /// ```
    ///
    /// ``start()`` and ``resume()`` are the MultipeerKit-style convenience on top: they run the
    /// same thing in a task of the transceiver's own.
    /// - Throws: what ``start()`` throws, and ``PeerKitError/alreadyRunning`` when the transceiver
    ///   runs already.
    public func run() async throws {
        guard let (session, callbacks) = try beginStart() else { throw PeerKitError.alreadyRunning }
        let outcome = Mutex<(any Error)?>(nil)
        let lifecycle = lifecycle, hub = hub, pending = pending
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await Self.run(session, callbacks: callbacks, lifecycle: lifecycle, hub: hub, configuration: configuration) { error in
                    outcome.withLock { $0 = error }
                }
            } onCancel: {
                Self.stop(session, lifecycle: lifecycle, hub: hub, pending: pending)
            }
        } onGracefulShutdown: {
            Self.stop(session, lifecycle: lifecycle, hub: hub, pending: pending)
        }
        if let error = outcome.withLock({ $0 }) { throw error }
    }

    /// Starts listening, advertising and browsing, and returns once the transceiver listens; the
    /// transceiver then runs (as ``run()`` does) in a task of its own until ``stop()``.
    ///
    /// Calling it while the transceiver runs does nothing.
    /// - Throws: ``PeerKitError/invalidServiceType(_:reason:)``, ``PeerKitError/invalidDiscoveryInfo(key:reason:)``
    ///   or ``PeerKitError/listenFailed(address:reason:)``. Discovery problems (such as a missing
    ///   avahi-daemon) do not throw: they arrive as ``PeerEvent/error(_:)`` and make
    ///   ``waitForPeer(timeout:where:)`` throw.
    public func start() async throws {
        guard let (session, callbacks) = try beginStart() else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            launch(session, callbacks: callbacks) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Starts the transceiver in the background, like ``start()``.
    ///
    /// The transceiver counts as running as soon as this returns: a ``broadcast(_:)`` right after
    /// it is not an error (it reaches the peers connected by then, which is none yet).
    /// Problems are logged and published as ``PeerEvent/error(_:)``.
    public func resume() {
        let started: (TransceiverSession, AsyncStream<PeerEvent>)?
        do {
            started = try beginStart()
        } catch {
            logger.error("\(error)")
            hub.publish(.error(error))
            return
        }
        guard let (session, callbacks) = started else { return }
        let (hub, logger, listenHost) = (hub, logger, configuration.listenHost)
        launch(session, callbacks: callbacks) { error in
            guard let error else { return }
            let reported = error as? PeerKitError ?? .listenFailed(address: listenHost, reason: "\(error)")
            logger.error("\(reported)")
            hub.publish(.error(reported))
        }
    }

    /// Runs `session` in a task of its own: the one unstructured task of the transceiver, behind
    /// ``start()`` and ``resume()``. The task does not keep the transceiver alive, so a transceiver
    /// that is let go stops (its `deinit` calls ``stop()``).
    private func launch(_ session: TransceiverSession, callbacks: AsyncStream<PeerEvent>, onStart: @escaping @Sendable ((any Error)?) -> Void) {
        let (lifecycle, hub, configuration) = (lifecycle, hub, configuration)
        Task {
            await Self.run(session, callbacks: callbacks, lifecycle: lifecycle, hub: hub, configuration: configuration, onStart: onStart)
        }
    }

    /// Validates the configuration and makes the session, synchronously; nil when already running.
    private func beginStart() throws(PeerKitError) -> (TransceiverSession, AsyncStream<PeerEvent>)? {
        try configuration.validate()
        let security = try WireSecurity(security: configuration.security, serviceType: configuration.serviceType)
        guard case .idle = lifecycle.withLockedValue({ $0 }) else { return nil }
        // Made before the lock: making it calls the user's code (a `.custom` discovery's factory,
        // the event loop group). A session that loses a race with another start is never started.
        let session = TransceiverSession(configuration: configuration, clock: clock, security: security, peerID: peerID, registry: registry, resourceRegistry: resourceRegistry, pending: pending, groups: groupDirectory, hub: hub, metrics: metrics)
        return lifecycle.withLockedValue { lifecycle -> (TransceiverSession, AsyncStream<PeerEvent>)? in
            guard case .idle = lifecycle else { return nil }
            lifecycle = .starting(session)
            // Under the lock, so that the closures see every event of this run and no other.
            return (session, hub.beginCallbacks())
        }
    }

    /// Runs a session made by ``beginStart()``: starts it, tells `onStart` how that went (nil:
    /// it runs), and returns when the session has stopped and its connections are closed.
    private static func run(
        _ session: TransceiverSession, callbacks: AsyncStream<PeerEvent>, lifecycle: NIOLockedValueBox<Lifecycle>,
        hub: PeerEventHub, configuration: PeerConfiguration, onStart: @escaping @Sendable ((any Error)?) -> Void
    ) async {
        let logger = configuration.logger
        await session.run(callbacks: callbacks) { result in
            let port: Int?
            switch result {
            case let .failure(error):
                session.stop()
                let ended = lifecycle.withLockedValue { lifecycle -> AsyncStream<PeerEvent>.Continuation? in
                    guard case let .starting(current) = lifecycle, current === session else { return nil }
                    lifecycle = .idle
                    return hub.detachCallbacks()
                }
                ended?.finish()
                onStart(error)
                return
            case let .success(listening):
                port = listening
            }
            let stillWanted = lifecycle.withLockedValue { lifecycle -> Bool in
                guard case let .starting(current) = lifecycle, current === session else { return false }
                lifecycle = .running(session)
                return true
            }
            guard stillWanted else {
                session.stop()  // stopped while starting
                onStart(nil)
                return
            }
            if case .none = configuration.security {
                logger.warning("PeerKit traffic of \"\(configuration.serviceType)\" is neither authenticated nor encrypted (PeerConfiguration.security is .none): anyone on the network can read and send messages. Set security = .preSharedKey(...) to protect it.")
            }
            logger.info("PeerKit transceiver \"\(LogSafe.text(configuration.peerName))\" started for service type \"\(configuration.serviceType)\"\(port.map { " on port \($0)" } ?? " (not listening)").")
            hub.publish(.started(port: port ?? 0))
            session.startDiscovery()
            onStart(nil)
        }
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
    /// connection is closed: each connection shuts its output after the bye and is closed when
    /// the peer, having read it, closes its end (at most about a second for a peer that does
    /// not read, or does not close).
    ///
    /// Once it returns, the loops of a ``PeerConfiguration/eventLoopGroup`` of your own can be shut
    /// down: what is left of a run started by ``start()`` or ``resume()`` no longer waits on them.
    /// With handlers on an ``EventLoopTaskExecutor``, wait for ``run()`` to return instead: its
    /// return is what says that nothing of the transceiver is left on the loops.
    public func shutdown() async {
        for closed in stopSession() {
            try? await closed.get()
        }
    }

    private func stopSession() -> [EventLoopFuture<Void>] {
        Self.stop(nil, lifecycle: lifecycle, hub: hub, pending: pending)
    }

    /// Stops the running session (only if it is `session`, when given): the one place where a
    /// run ends, whether by ``stop()``, cancellation or a graceful shutdown.
    @discardableResult
    private static func stop(_ session: TransceiverSession?, lifecycle: NIOLockedValueBox<Lifecycle>, hub: PeerEventHub, pending: PendingRequests) -> [EventLoopFuture<Void>] {
        // The run's closure events are taken under the lock that ends the run: a start right
        // after it begins its own, which this stop must not finish.
        let stopping = lifecycle.withLockedValue { lifecycle -> (TransceiverSession, AsyncStream<PeerEvent>.Continuation?)? in
            switch lifecycle {
            case .idle:
                return nil
            case let .starting(current), let .running(current):
                if let session, current !== session { return nil }
                lifecycle = .idle
                return (current, hub.detachCallbacks())
            }
        }
        guard let (stopping, callbacks) = stopping else { return [] }
        let closed = stopping.stop()
        pending.failAll(with: PeerKitError.notRunning)
        hub.publishStopped(callbacks: callbacks)
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

    /// Whether discovery has reported every peer it already knew of since the last start
    /// (``PeerEvent/knownPeersListed``). A one-shot tool that wants "the peers there are" waits for
    /// this instead of a fixed delay: with Avahi it comes within milliseconds, from the daemon's cache.
    public var knownPeersListed: Bool { session?.knownServicesListed ?? false }

    /// Where `peer`'s connection comes from, as PeerKit counts its own limits per address: an
    /// IPv4 address such as `"192.168.1.20"`, or the /64 prefix of an IPv6 one such as
    /// `"fd00:0:0:1::/64"` (one host can take any address of its /64). Nil while the peer has no
    /// connection (not connected, switching to a tie-break's winner, or suspended), or when the
    /// transport has no IP addresses.
    ///
    /// A peer ID is whatever a peer says it is; its address is not. Key limits of your own on
    /// this (for example, how many expensive answers one host may have in flight), so that one
    /// host cannot take them all by claiming several peer IDs.
    public func sourceAddress(of peer: Peer) -> String? {
        session?.manager.sourceAddress(of: peer.id)
    }
}
