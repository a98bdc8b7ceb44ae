import Logging
import NIOConcurrencyHelpers
import NIOCore

/// One run of a transceiver, from ``PeerTransceiver/start()`` to ``PeerTransceiver/stop()``:
/// the connection manager, the discovery backend and the dispatcher, wired together. Messages go
/// from the connection manager straight to the dispatcher; the session takes the manager's
/// events (peer events, connections established, feature control frames), in order.
final class TransceiverSession: ConnectionManagerDelegate {
    let manager: ConnectionManager
    let dispatcher: MessageDispatcher
    let resources: ResourceTransfers
    /// Work started for connections (admission hooks), run as child tasks of ``run(callbacks:onStart:)``.
    let tasks: SessionTasks
    private let discovery: (any PeerDiscovery)?
    private let hub: PeerEventHub
    private let pending: PendingRequests
    private let groups: GroupDirectory
    private let configuration: PeerConfiguration
    private let peerID: String
    private let state = NIOLockedValueBox(State())
    /// Whether discovery has started, is starting, or may no longer start. The backend (which may
    /// be the user's, `.custom`) is started and stopped with no lock held; a ``stop()`` that comes
    /// while ``startDiscovery()`` is starting it leaves the stop to the starter, once `start`
    /// returned, so that no backend is left running.
    private let discoveryPhase = NIOLockedValueBox(DiscoveryPhase.notStarted)

    private enum DiscoveryPhase {
        case notStarted, starting, started, stopped
    }

    private struct State {
        var port: Int?
        var discoveryFailure: PeerKitError?
        var knownServicesListed = false
        var stopCalled = false
        /// Set by ``stop()``: the connections' and the listener's closing (what a later call returns).
        var closing: [EventLoopFuture<Void>]?
        /// How many of ``closing`` have not completed yet: what ``run(callbacks:onStart:)`` waits for.
        var unclosed = 0
        /// The run waiting for ``stop()`` and then for every close.
        var closedWaiter: CheckedContinuation<Void, Never>?
    }

    init(configuration: PeerConfiguration, clock: PeerClock, security: WireSecurity, peerID: String, registry: MessageRegistry, resourceRegistry: ResourceRegistry, pending: PendingRequests, groups: GroupDirectory, hub: PeerEventHub, metrics: PeerMetrics) {
        self.configuration = configuration
        self.peerID = peerID
        let tasks = SessionTasks()
        self.tasks = tasks
        self.hub = hub
        self.pending = pending
        self.groups = groups
        let hello = Hello(
            peerID: peerID,
            name: configuration.peerName,
            serviceType: configuration.serviceType,
            discoveryInfo: configuration.discoveryInfo.isEmpty ? nil : configuration.discoveryInfo,
            features: Hello.supportedFeatures
        )
        manager = ConnectionManager(
            configuration: .init(
                localHello: hello,
                listenHost: configuration.listenHost,
                listenPort: configuration.listenPort,
                listens: configuration.advertises,
                maximumFrameLength: configuration.maximumFrameLength,
                maximumHandshakeFrameLength: configuration.maximumHandshakeFrameLength,
                maximumQueuedOutboundBytes: configuration.maximumQueuedOutboundBytes,
                slowPeerGracePeriod: configuration.slowPeerGracePeriod.timeAmount,
                maximumQueuedInboundBytes: configuration.maximumQueuedInboundBytes,
                maximumTotalQueuedInboundBytes: configuration.maximumTotalQueuedInboundBytes,
                maximumTotalQueuedOutboundBytes: configuration.maximumTotalQueuedOutboundBytes,
                maximumConnections: configuration.maximumConnections,
                maximumPendingHandshakes: configuration.maximumPendingHandshakes,
                maximumPendingHandshakesPerAddress: configuration.maximumPendingHandshakesPerAddress,
                preHandshakeTimeout: configuration.preHandshakeTimeout.timeAmount,
                heartbeatInterval: configuration.heartbeatInterval.timeAmount,
                peerTimeout: configuration.peerTimeout.timeAmount,
                handshakeTimeout: configuration.handshakeTimeout.timeAmount,
                connectTimeout: configuration.connectTimeout.timeAmount,
                backoff: configuration.reconnectBackoff,
                security: security,
                admission: AdmissionGate(admission: configuration.admission, timeout: configuration.handshakeTimeout.timeAmount, clock: clock, tasks: tasks),
                metrics: metrics,
                clock: clock,
                transport: configuration.transport,
                sessions: configuration.resumesSessions ? .init(window: configuration.sessionResumeWindow, maximumUnacknowledgedBytes: configuration.maximumUnacknowledgedBytes) : nil
            ),
            group: configuration.eventLoopGroup,
            logger: configuration.logger
        )
        dispatcher = MessageDispatcher(registry: registry, pending: pending, groups: groups, metrics: metrics, logger: configuration.logger) { error in
            hub.publish(.error(error))
        }
        resources = ResourceTransfers(
            registry: resourceRegistry,
            limits: .init(
                chunkLength: configuration.resourceChunkLength,
                window: configuration.resourceWindowBytes,
                maximumConcurrentIncoming: configuration.maximumConcurrentIncomingResources,
                maximumConcurrentIncomingPerConnection: configuration.maximumConcurrentIncomingResourcesPerPeer,
                maximumIncomingBytes: configuration.maximumIncomingResourceBytes,
                maximumFrameLength: configuration.maximumFrameLength,
                stallTimeout: configuration.resourceStallTimeout
            ),
            clock: clock,
            logger: configuration.logger,
            tasks: tasks,
            resumesSessions: configuration.resumesSessions
        )
        switch configuration.discovery {
        case .avahi: discovery = AvahiDiscovery(logger: configuration.logger)
        case let .staticPeers(endpoints): discovery = StaticDiscovery(endpoints: endpoints)
        case let .custom(make): discovery = make()
        case .none: discovery = nil
        }
        // Before run() starts the dispatcher: every answer goes to the asking peer's connection
        // of the moment, from the first one on.
        dispatcher.setOutbound(manager)
    }

    /// The port listened on, once started.
    var port: Int? { state.withLockedValue { $0.port } }

    /// Set while discovery reports that it cannot work.
    var discoveryFailure: PeerKitError? { state.withLockedValue { $0.discoveryFailure } }

    /// Whether discovery has reported every service it already knew of.
    var knownServicesListed: Bool { state.withLockedValue { $0.knownServicesListed } }

    /// The session's whole life as one structured task: starts it (``start()``) and tells
    /// `onStart` how that went; then the message dispatcher and the closure callbacks run as child
    /// tasks until ``stop()``. Returns once both have ended and every connection is closed.
    ///
    /// Once ``stop()`` was called, this schedules nothing on the event loops: it counts the
    /// closes down from callbacks that ``stop()`` registered. It may resume only after
    /// ``PeerTransceiver/shutdown()`` returned and the program shut its loops down; waiting with
    /// `EventLoopFuture.get()`, which hops to the future's loop even when the future is complete,
    /// then scheduled on a loop that had shut down (NIO printed "Cannot schedule tasks on an
    /// EventLoop that has already shut down") and never returned.
    func run(callbacks: AsyncStream<PeerEvent>, onStart: @escaping @Sendable (Result<Int?, any Error>) -> Void) async {
        await withDiscardingTaskGroup { group in
            // Only a real preference is passed: a task made with `executorPreference: nil` still
            // carries a preference record, which the runtime then reads under the task's status
            // lock at every `await` of every handler (3 % of a receiver's CPU on 100 B messages).
            if let handlerExecutor = configuration.handlerExecutor {
                group.addTask(executorPreference: handlerExecutor) { await self.dispatcher.run() }
            } else {
                group.addTask { await self.dispatcher.run() }
            }
            group.addTask { await self.tasks.run() }
            group.addTask { await self.hub.deliverCallbacks(callbacks) }
            do {
                onStart(.success(try await start()))
            } catch {
                onStart(.failure(error))  // which stops this session
            }
            await closedAfterStop()
        }
    }

    /// Returns once ``stop()`` was called and every connection and the listener it closed is closed.
    private func closedAfterStop() async {
        await withCheckedContinuation { continuation in
            let closed = state.withLockedValue { state -> Bool in
                if state.closing != nil, state.unclosed == 0 { return true }
                state.closedWaiter = continuation
                return false
            }
            if closed { continuation.resume() }
        }
    }

    /// One of the closes ``stop()`` started completed; the last one ends the run's wait.
    private func closeCompleted() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.unclosed -= 1
            guard state.unclosed == 0 else { return nil }
            defer { state.closedWaiter = nil }
            return state.closedWaiter
        }
        waiter?.resume()
    }

    /// Listens. Returns the port (nil when not listening). Discovery starts afterwards, in
    /// ``startDiscovery()``, once the transceiver has said it started.
    private func start() async throws -> Int? {
        manager.setDelegate(self, messages: dispatcher, resources: resources)
        let port = try await manager.start()
        state.withLockedValue { $0.port = port }
        return port
    }

    /// Starts advertising and browsing. Called once the transceiver has published
    /// ``PeerEvent/started(port:)``, so that no discovery event (a failure to reach avahi-daemon
    /// comes at once) reaches the event stream before it. Does nothing after ``stop()``.
    func startDiscovery() {
        guard let discovery else { return }
        let port = state.withLockedValue { $0.port }
        var txt = configuration.discoveryInfo
        txt["peerid"] = peerID
        txt["proto"] = String(Hello.currentProtocol)
        txt.merge(manager.configuration.security.txtRecord) { _, security in security }
        let request = DiscoveryRequest(
            serviceType: configuration.serviceType,
            peerID: peerID,
            peerName: configuration.peerName,
            port: configuration.advertises ? port : nil,
            txtRecord: txt,
            addressFamilies: manager.listeningFamilies()
        )
        let starts = discoveryPhase.withLockedValue { phase -> Bool in
            guard case .notStarted = phase else { return false }
            phase = .starting
            return true
        }
        guard starts else { return }
        // Not `self`: a weakly referenced object takes the slow path for every retain and
        // release (its side table), and this session is retained for every message sent.
        let (state, manager) = (self.state, self.manager)
        discovery.start(request) { event in
            Self.discoveryEvent(event, state: state, manager: manager)
        }
        let stoppedMeanwhile = discoveryPhase.withLockedValue { phase -> Bool in
            guard case .starting = phase else { return true }
            phase = .started
            return false
        }
        if stoppedMeanwhile { discovery.stop() }
    }

    /// Stops discovery, says bye to every peer, and ends the dispatcher after what it has queued;
    /// the run then ends. Returns futures that complete when every connection and the listener are
    /// closed. A later call does nothing and returns the first call's futures (none while the
    /// first is still under way).
    @discardableResult
    func stop() -> [EventLoopFuture<Void>] {
        let first = state.withLockedValue { state -> Bool in
            defer { state.stopCalled = true }
            return !state.stopCalled
        }
        guard first else { return state.withLockedValue { $0.closing } ?? [] }
        // While the backend is starting, its starter stops it once `start` returned.
        let stopsNow = discoveryPhase.withLockedValue { phase -> Bool in
            defer { phase = .stopped }
            if case .started = phase { return true }
            return false
        }
        if stopsNow { discovery?.stop() }
        resources.stop()
        let closed = manager.stop()
        manager.setDelegate(nil, messages: nil)
        groups.sessionStopped()
        dispatcher.finish()
        tasks.finish()
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.closing = closed
            state.unclosed = closed.count
            guard closed.isEmpty else { return nil }
            defer { state.closedWaiter = nil }
            return state.closedWaiter
        }
        waiter?.resume()
        // Registered now, while the loops run: the run counts the closes down instead of waiting
        // on the futures itself, which would hop to their loops whenever it resumes (after
        // shutdown() returned, they may have been shut down).
        for future in closed {
            future.whenComplete { _ in self.closeCompleted() }
        }
        return closed
    }

    private static func discoveryEvent(_ event: DiscoveryEvent, state: NIOLockedValueBox<State>, manager: ConnectionManager) {
        state.withLockedValue { state in
            switch event {
            case let .failed(error): state.discoveryFailure = error
            case .recovered, .found: state.discoveryFailure = nil
            case .knownServicesListed: state.knownServicesListed = true
            case .lost, .advertised: break
            }
        }
        manager.handle(event)
    }

    // MARK: ConnectionManagerDelegate

    func handle(_ event: ConnectionEvent) {
        switch event {
        case let .peer(event):
            if case let .peerDisconnected(peer, reason) = event {
                // Requests waiting on the peer fail with the reason its connection ended.
                pending.failAll(peerID: peer.id, with: reason ?? PeerKitError.connectionClosed(peer: peer.name))
                // Its requests still queued here are not answered: nobody would read the answers.
                dispatcher.peerDisconnected(peer.id, current: manager.connection(to: peer.id))
                // It left its groups, which is said before it disconnected.
                for left in groups.peerDisconnected(peer) { hub.publish(left) }
            }
            hub.publish(event)
        case let .established(connection):
            groups.greet(connection)
        case let .sessionRestarted(peer, reason):
            // Their requests or replies may have been lost with the peer's side of the session.
            pending.failAll(peerID: peer.id, with: reason)
            hub.publish(.error(reason))
        case let .control(envelope, peer, connection):
            // A peer that did not list the feature takes no part in it: its frames are ignored.
            guard envelope.type == EnvelopeType.groups, connection.supports(Hello.Feature.groups) else { return }
            do throws(ConnectionStateMachine.Failure) {
                for change in try groups.received(envelope, from: peer) { hub.publish(change) }
            } catch {
                // Logged with the reason by the connection manager when the connection closes.
                connection.requestClose(.failed(error))
            }
        }
    }
}
