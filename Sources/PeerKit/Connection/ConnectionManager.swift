import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Owns every connection of one transceiver: listens, dials what discovery finds, completes
/// handshakes, keeps exactly one connection per peer, and redials lost peers with back-off.
///
/// Each peer's life above its connections (which connection is its own, the tie-break, the
/// switch to the winner, what is held meanwhile) is a ``PeerStateMachine``, kept in the peer's
/// ``PeerKit/PeerRecord``, which also decides what becomes of its resumable session (feature
/// `resume`: a connection arriving, the peer's resumes, resends and acknowledgements, its
/// numbered frames, the acknowledgement timer, the resume window ending); the manager carries
/// out what they return. Users' frames go to peers (``send(_:to:)``,
/// ``sendWithoutWaiting(_:to:)``, ``broadcast(_:)``), never to a connection chosen by the caller.
///
/// State lives behind one lock, and nothing is called with it held but a ``PeerConnection``'s
/// own lock, a leaf (a session's frames are appended to a connection's outbox in numbering
/// order, and a connection's peer and address are read). Events for the
/// ``ConnectionManagerDelegate`` are queued under that lock, in the order the state changed, and
/// delivered after it is released by whichever thread finds the queue unclaimed; so the delegate
/// still sees events in order. Timers to cancel, redials to arm and dropped messages to credit
/// are likewise collected under the lock and handled after it (``withState(_:)``).
///
/// Limits a stranger could push against: ``Configuration/maximumConnections`` (further
/// connections are closed at once, with one log line per episode), the handshake slots
/// (``HandshakeSlots``: ``Configuration/maximumPendingHandshakesPerAddress`` refuses, and when all
/// ``Configuration/maximumPendingHandshakes`` are taken the oldest of the busiest address is
/// evicted; one log line per episode, then counts every 10 s), accept errors such as EMFILE (NIO's `AcceptBackoffHandler` pauses
/// accepting for a second, again with one log line per episode), and redials (exponential
/// back-off, with one log line when a service becomes unreachable and one when it is reached again).
final class ConnectionManager: PeerConnectionDelegate, PeerOutbound, Sendable {
    /// Everything the manager needs to know, fixed at creation.
    struct Configuration: Sendable {
        var localHello: Hello
        var listenHost: String
        var listenPort: Int
        var listens: Bool
        var maximumFrameLength: Int
        var maximumHandshakeFrameLength: Int = 64 * 1024
        var maximumQueuedOutboundBytes: Int = 32 * 1024 * 1024
        var slowPeerGracePeriod: TimeAmount = .seconds(10)
        var maximumQueuedInboundBytes: Int = 4 * 1024 * 1024
        var maximumTotalQueuedInboundBytes: Int = 32 * 1024 * 1024
        var maximumTotalQueuedOutboundBytes: Int = 128 * 1024 * 1024
        var maximumConnections: Int = 512
        var maximumPendingHandshakes: Int = 64
        var maximumPendingHandshakesPerAddress: Int = 8
        var preHandshakeTimeout: TimeAmount = .seconds(2)
        var heartbeatInterval: TimeAmount
        var peerTimeout: TimeAmount
        var handshakeTimeout: TimeAmount
        var connectTimeout: TimeAmount
        var backoff: Backoff
        var security: WireSecurity = .plaintext
        var admission = AdmissionGate(admission: nil, timeout: .seconds(10))
        var metrics: PeerMetrics = .disabled
        /// Every timer's clock (``PeerConfiguration/clock``).
        var clock: PeerClock = .continuous
        /// Where channels come from instead of TCP (``PeerConfiguration/transport``).
        var transport: (any PeerTransport)?
        /// Resumable sessions (feature `resume`); nil: off (``PeerConfiguration/resumesSessions``).
        var sessions: Sessions?
    }

    /// How resumable sessions are kept (``PeerConfiguration/sessionResumeWindow``,
    /// ``PeerConfiguration/maximumUnacknowledgedBytes``).
    struct Sessions: Sendable {
        var window: Duration
        var maximumUnacknowledgedBytes: Int
        /// This run of the transceiver, sent in the hello: a peer that sees another one knows we restarted.
        var incarnation = UUID().uuidString
    }

    /// A peer's session in the manager: a sender waiting for acknowledgements leaves a continuation.
    typealias Session = PeerSession<CheckedContinuation<Void, Never>>

    /// A peer in the manager (``PeerKit/PeerRecord``): connections are ``PeerConnection``s,
    /// timers ``PeerTimer``s, and a sender waiting (for acknowledgements, or for a switch to end)
    /// leaves a continuation.
    typealias PeerRecord = PeerKit.PeerRecord<PeerConnection, PeerTimer, CheckedContinuation<Void, Never>>

    /// A peer's state machine in the manager: connections are ``PeerConnection``s, and a sender
    /// waiting for a switch to end leaves a continuation.
    typealias PeerLink = PeerStateMachine<PeerConnection, CheckedContinuation<Void, Never>>

    private struct ServiceRecord {
        var service: DiscoveredService
        /// From the TXT record, or learned from the handshake of a connection dialled for it.
        var peerID: String?
        /// Whether a dial is under way, the back-off, the redial timer.
        var dialer = ServiceDialer<PeerTimer>()

        /// Forgets the redial: its timer, if armed, is cancelled after the lock is released.
        mutating func cancelRetry(_ state: inout State) {
            if let retry = dialer.cancelRetry() { state.timersToCancel.append(retry) }
        }
        /// The dial under way across the service's endpoints (Happy Eyeballs), until one connected
        /// or all failed.
        var plan: DialPlan?
        /// Which dial ``plan`` is: callbacks of an earlier dial's attempts and timers are ignored.
        var planGeneration = 0
        /// Which arming of the plan's attempt timer is current: an earlier arming's firing is ignored.
        var planTimerArming = 0
        /// The channels of the plan's attempts under way, so that the losers are closed.
        var attempts: [PeerEndpoint: any Channel] = [:]
    }

    private struct State {
        var running = false
        /// The hello sent on new connections; its name follows the advertised instance name.
        var localHello: Hello
        var server: (any Channel)?
        /// The listener when a ``PeerTransport`` replaces TCP.
        var listener: (any PeerTransportListener)?
        var connections: [ObjectIdentifier: PeerConnection] = [:]
        /// Accepted channels whose handshake has not completed (by channel identity): their
        /// slots, limited per address and in total (see ``HandshakeSlots``).
        var pendingHandshakes = HandshakeSlots<ObjectIdentifier, any Channel>(limits: .init(total: 64, perSource: 8))
        /// Accepted channels whose connection object does not exist yet (by channel identity).
        var accepting: Set<ObjectIdentifier> = []
        /// The connection cap in force: the configured one, or less when the descriptor limit
        /// leaves room for fewer (see ``DescriptorBudget``).
        var maximumConnections: Int
        var peers: [String: PeerRecord] = [:]
        var services: [String: ServiceRecord] = [:]
        /// How many duplicate connections were resolved by the tie-break (a diagnostic for tests).
        var tieBreaks = 0
        /// Why recently disconnected peers were disconnected, for `send`'s error; at most
        /// ``maximumRecentFailures`` entries (the oldest goes first).
        var recentFailures: [String: PeerKitError] = [:]
        var recentFailureOrder: [String] = []
        static let maximumRecentFailures = 256

        /// Timers to cancel, and redials to arm, once the lock is released (``withState(_:)``):
        /// scheduling and cancelling are calls into the clock, never made with the lock held.
        var timersToCancel: [PeerTimer] = []
        var retriesToArm: [(key: String, delay: Duration, arming: Int)] = []
        /// The number of the last redial decided, over all services: a timer armed for a service
        /// that was since removed and found again is never taken for its new record's.
        var lastRetryArming = 0

        /// The number of a new redial arming.
        mutating func nextRetryArming() -> Int {
            lastRetryArming += 1
            return lastRetryArming
        }

        mutating func rememberFailure(_ error: PeerKitError, of peerID: String) {
            if recentFailures.updateValue(error, forKey: peerID) == nil {
                recentFailureOrder.append(peerID)
                if recentFailureOrder.count > Self.maximumRecentFailures {
                    recentFailures[recentFailureOrder.removeFirst()] = nil
                }
            }
        }

        /// Incoming connections refused in the current over-limit episode (0: not refusing).
        var refusedInEpisode = 0
        /// Messages held for a peer that disconnected before they were handed on: credited back
        /// to their connections' inbound limits outside the lock (``withState(_:)``).
        var droppedInbound: [(envelope: Envelope, connection: PeerConnection)] = []
        /// Senders waiting on a session (for acknowledgements) to resume once the lock is released.
        var waitersToResume: [CheckedContinuation<Void, Never>] = []
        /// Session frames appended to a connection's outbox under the lock (in their numbering's
        /// order, see ``writeSession(of:state:)``), whose drains are scheduled once it is released:
        /// the first, then the rest. Most locks append once (a send to one peer), and the first
        /// needs no array.
        var firstAppendToFinish: (PeerConnection, PeerConnection.Appended)?
        var appendsToFinish: [(PeerConnection, PeerConnection.Appended)] = []

        /// Remembers an append to `connection`'s outbox whose drain is scheduled once the lock is
        /// released, after those remembered before it.
        mutating func finishAppend(_ appended: PeerConnection.Appended, to connection: PeerConnection) {
            if firstAppendToFinish == nil {
                firstAppendToFinish = (connection, appended)
            } else {
                appendsToFinish.append((connection, appended))
            }
        }
        /// Events waiting to be delivered, in order, and whether a thread is delivering them.
        var events: [ConnectionEvent] = []
        var delivering = false

        mutating func emit(_ event: PeerEvent) {
            events.append(.peer(event))
        }

        mutating func queue(_ event: ConnectionEvent) {
            events.append(event)
        }
    }

    let configuration: Configuration
    /// One heartbeat timer per event loop for all connections.
    private let heartbeats: HeartbeatTicker
    private let group: any EventLoopGroup
    /// What all connections together may hold unhandled (``Configuration/maximumTotalQueuedInboundBytes``).
    let inboundBudget: InboundBudget
    /// What all connections together may hold queued to send (``Configuration/maximumTotalQueuedOutboundBytes``).
    let outboundBudget: OutboundBudget
    /// Where the manager's own timers run (and a request's timeout, when its peer is switching).
    let timerLoop: any EventLoop
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    private let delegateBox = NIOLockedValueBox<(any ConnectionManagerDelegate)?>(nil)
    private let messagesBox = NIOLockedValueBox<(any InboundMessageSink)?>(nil)
    private let resourcesBox = NIOLockedValueBox<(any ResourceFrameSink)?>(nil)
    /// The families the listener accepts, and its port when it is bound to every address (so that
    /// an endpoint on a local address and this port is ourselves); set by ``start()``.
    private let listened = NIOLockedValueBox<(families: AddressFamilies, wildcardPort: Int?)>((.all, nil))

    init(configuration: Configuration, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        var hello = configuration.localHello
        if let sessions = configuration.sessions {
            hello.features = (hello.features ?? []) + [Hello.Feature.resume]
            hello.session = sessions.incarnation
        }
        var initial = State(localHello: hello, maximumConnections: configuration.maximumConnections)
        initial.pendingHandshakes = HandshakeSlots(limits: .init(total: configuration.maximumPendingHandshakes, perSource: configuration.maximumPendingHandshakesPerAddress))
        self.state = NIOLockedValueBox(initial)
        self.group = group
        self.timerLoop = group.next()
        self.inboundBudget = InboundBudget(limit: configuration.maximumTotalQueuedInboundBytes)
        self.outboundBudget = OutboundBudget(limit: configuration.maximumTotalQueuedOutboundBytes)
        self.logger = logger
        self.heartbeats = HeartbeatTicker(interval: ConnectionStateMachine.Configuration.tickInterval(
            heartbeatInterval: configuration.heartbeatInterval, peerTimeout: configuration.peerTimeout
        ), clock: configuration.clock)
    }

    /// Where events and messages go. Set before ``start()``.
    func setDelegate(_ delegate: (any ConnectionManagerDelegate)?, messages: (any InboundMessageSink)?, resources: (any ResourceFrameSink)? = nil) {
        delegateBox.withLockedValue { $0 = delegate }
        messagesBox.withLockedValue { $0 = messages }
        resourcesBox.withLockedValue { $0 = resources }
    }

    private var localPeerID: String { configuration.localHello.peerID }

    /// Runs `body` with the state locked, then delivers the events it queued.
    @discardableResult
    private func withState<T>(_ body: (inout State) throws -> T) rethrows -> T {
        let (result, dropped, cancel, arm, resume, firstAppend, appends, events) = try state.withLockedValue { state in
            let result = try body(&state)
            // Events to deliver: checked here, so that a change without any costs no second lock.
            let events = !state.events.isEmpty && !state.delivering
            defer {
                state.droppedInbound = []
                state.timersToCancel = []
                state.retriesToArm = []
                state.waitersToResume = []
                state.firstAppendToFinish = nil
                state.appendsToFinish = []
            }
            return (result, state.droppedInbound, state.timersToCancel, state.retriesToArm, state.waitersToResume,
                    state.firstAppendToFinish, state.appendsToFinish, events)
        }
        if let (connection, appended) = firstAppend { connection.finishAppend(appended) }
        for (connection, appended) in appends { connection.finishAppend(appended) }
        for waiter in resume { waiter.resume() }
        for (envelope, connection) in dropped { connection.inboundDropped(envelope) }
        for timer in cancel { timer.cancel() }
        for retry in arm { armRetry(retry) }
        if events { deliverEvents() }
        return result
    }

    /// Schedules a redial decided under the lock, then stores its timer, unless the redial was
    /// cancelled or replaced meanwhile (then the timer is cancelled at once).
    private func armRetry(_ retry: (key: String, delay: Duration, arming: Int)) {
        let timer = configuration.clock.schedule(on: timerLoop, in: retry.delay) { self.redialDue(key: retry.key) }
        let kept = state.withLockedValue { state -> Bool in
            guard var record = state.services[retry.key], record.dialer.retryArmed(timer, arming: retry.arming) else { return false }
            state.services[retry.key] = record
            return true
        }
        if !kept { timer.cancel() }
    }

    /// A redial's timer fired: the service's dialler forgets it, then the service is dialled
    /// (unless its peer is connected meanwhile, or a dial is under way).
    private func redialDue(key: String) {
        state.withLockedValue { $0.services[key]?.dialer.retryFired() }
        dial(key: key)
    }

    /// Delivers queued events, unless another thread already is (it will deliver these too).
    private func deliverEvents() {
        let claimed = state.withLockedValue { state -> Bool in
            guard !state.events.isEmpty, !state.delivering else { return false }
            state.delivering = true
            return true
        }
        guard claimed else { return }
        let delegate = delegateBox.withLockedValue { $0 }
        while true {
            let batch = state.withLockedValue { state -> [ConnectionEvent] in
                if state.events.isEmpty { state.delivering = false }
                defer { state.events.removeAll(keepingCapacity: true) }
                return state.events
            }
            if batch.isEmpty { return }
            for event in batch { delegate?.handle(event) }
        }
    }

    // MARK: Lifecycle

    /// Starts listening (when configured to); returns the port, or nil when not listening.
    func start() async throws -> Int? {
        withState { $0.running = true }
        guard configuration.listens else { return nil }
        if let transport = configuration.transport {
            return try await listen(on: transport)
        }
        let budget = DescriptorBudget.current()
        let cap = min(configuration.maximumConnections, budget?.connections ?? .max)
        withState { $0.maximumConnections = cap }
        if let budget, cap < configuration.maximumConnections {
            logger.notice("The descriptor limit (ulimit -n) is \(budget.limit) with \(budget.open) open, which leaves room for \(budget.connections) connections: PeerConfiguration.maximumConnections (\(configuration.maximumConnections)) is lowered to \(budget.connections). Raise the limit to allow more.")
        }
        var host = configuration.listenHost
        do {
            let server: any Channel
            do {
                server = try await bindListener(host: host)
            } catch where host == "::" {
                // The kernel has no IPv6 (booted with ipv6.disable=1): listen on IPv4 alone,
                // and advertise IPv4 alone (``listeningFamilies()``).
                logger.debug("Cannot listen on [::]:\(configuration.listenPort) (\(Self.describe(error))); listening on 0.0.0.0:\(configuration.listenPort), IPv4 only, instead.")
                host = "0.0.0.0"
                server = try await bindListener(host: host)
            }
            let wildcard = ["::", "0.0.0.0"].contains(server.localAddress?.ipAddress ?? "")
            listened.withLockedValue { $0 = (Self.families(of: server.localAddress), wildcard ? server.localAddress?.port : nil) }
            let stillRunning = withState { state -> Bool in
                if state.running { state.server = server }
                return state.running
            }
            if !stillRunning { try? await server.close() }
            return server.localAddress?.port
        } catch {
            withState { $0.running = false }
            throw PeerKitError.listenFailed(address: PeerEndpoint(host: host, port: configuration.listenPort).description, reason: Self.describe(error))
        }
    }

    /// The address families a listener bound to `address` accepts: both for the unspecified IPv6
    /// address (NIO clears IPV6_V6ONLY on every IPv6 socket, so IPv4 peers arrive as IPv4-mapped
    /// addresses), IPv6 for another IPv6 address, IPv4 for an IPv4 address.
    static func families(of address: SocketAddress?) -> AddressFamilies {
        switch address {
        case .v4: .ipv4
        case .v6: address?.ipAddress == "::" ? .all : .ipv6
        default: .all
        }
    }

    /// The families the listener accepts, and so the ones to advertise; ``AddressFamilies/all``
    /// before ``start()`` and with a ``PeerTransport``.
    func listeningFamilies() -> AddressFamilies {
        listened.withLockedValue { $0.families }
    }

    /// Binds the TCP listener to `host` and the configured port.
    private func bindListener(host: String) async throws -> any Channel {
        let address = PeerEndpoint(host: host, port: configuration.listenPort).description
        let logger = logger
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // Accept errors (EMFILE at the descriptor limit) pause accepting for a
                    // second instead of spinning; the logger says so once per episode.
                    try channel.pipeline.syncOperations.addHandler(AcceptBackoffHandler(shouldForwardIOErrorCaught: true))
                    try channel.pipeline.syncOperations.addHandler(AcceptErrorLogger(logger: logger, address: address))
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try self.configureInbound(channel)
                }
            }
            .bind(host: host, port: configuration.listenPort)
            .get()
    }

    /// Listens on a transport that replaces TCP; accepted channels get the same checks and
    /// pipeline as accepted sockets.
    private func listen(on transport: any PeerTransport) async throws -> Int? {
        do {
            let listener = try await transport.listen(group: group) { channel in
                try self.configureInbound(channel)
            }
            let stillRunning = withState { state -> Bool in
                if state.running { state.listener = listener }
                return state.running
            }
            if !stillRunning { try? await listener.close().get() }
            return listener.port
        } catch {
            withState { $0.running = false }
            throw PeerKitError.listenFailed(address: "the test transport", reason: Self.describe(error))
        }
    }

    /// Says bye to every connected peer, closes every connection and the listener, and reports
    /// every peer disconnected and removed. Idempotent. Returns futures that complete when the
    /// connections and the listener are closed.
    @discardableResult
    func stop() -> [EventLoopFuture<Void>] {
        var waiters: [CheckedContinuation<Void, Never>] = []
        var timers: [PeerTimer] = []
        // What sessions kept and did not write yet (a peer whose resume has not arrived on its
        // new connection, or sent just now): written before the bye, which follows it out. Not
        // while another thread writes the session's frames (it holds earlier ones, which must go
        // first): what it has not taken yet is lost with the stop.
        var flushes: [(PeerConnection, Session.Writes)] = []
        // Suspended peers' frames have no connection to go out on: said in the log, not dropped unsaid.
        var stranded: [(peer: Peer, frames: Int, bytes: Int)] = []
        let (connections, server, listener) = withState { state -> ([PeerConnection], (any Channel)?, (any PeerTransportListener)?) in
            guard state.running else { return ([], nil, nil) }
            state.running = false
            timers += state.services.values.compactMap(\.dialer.retry)
            var removed = false
            for var record in state.peers.values {
                if let (_, timer) = record.switchTimer { timers.append(timer) }
                if let (_, timer) = record.windowTimer { timers.append(timer) }
                if let session = record.session, session.isSuspended, session.unacknowledgedCount > 0 {
                    stranded.append((record.peer, session.unacknowledgedCount, session.unacknowledgedBytes))
                }
                if var session = record.session, let current = record.link.current {
                    let writes = session.takeUnwrittenForStop()
                    record.session = session
                    if !writes.isEmpty { flushes.append((current, writes)) }
                }
                if record.isConnected { state.emit(.peerDisconnected(record.snapshot, reason: nil)) }
                waiters += record.link.stop()
                waiters += record.session?.end(.notRunning) ?? []
                state.emit(.peerRemoved(record.snapshot))
                removed = true
            }
            if removed { state.emit(.availablePeersChanged([])) }
            state.peers = [:]
            state.services = [:]
            state.pendingHandshakes = HandshakeSlots(limits: state.pendingHandshakes.limits)
            state.accepting = []
            defer { state.connections = [:]; state.server = nil; state.listener = nil }
            return (Array(state.connections.values), state.server, state.listener)
        }
        for timer in timers { timer.cancel() }
        for waiter in waiters { waiter.resume() }
        for (peer, frames, bytes) in stranded {
            logger.warning("Stopped while \(peer) was unreachable: \(frames) messages (\(bytes) bytes) sent to it were not acknowledged, and may not have arrived.")
        }
        for (connection, writes) in flushes {
            if let from = writes.from { connection.send(SessionFrame.resend(from: from).encode()) }
            for frame in writes.frames { _ = connection.enqueue(frame, below: nil) }
        }
        for connection in connections {
            connection.requestClose(.stopped)
        }
        server?.close(promise: nil)
        let listenerClosed = listener?.close()
        return connections.map(\.channel.closeFuture) + (server.map { [$0.closeFuture] } ?? []) + (listenerClosed.map { [$0] } ?? [])
    }

    // MARK: Queries

    /// Whether the peer is connected (also while it switches to a tie-break's winner).
    func isConnected(_ peerID: String) -> Bool {
        state.withLockedValue { $0.peers[peerID]?.isConnected ?? false }
    }

    /// Whether the peer has no connection now, and its session waits for it to come back within
    /// its resume window.
    func isSuspended(_ peerID: String) -> Bool {
        state.withLockedValue { $0.peers[peerID]?.session?.isSuspended ?? false }
    }

    /// The peer, when it is connected (also while it switches to a tie-break's winner).
    func connectedPeer(_ peerID: String) -> Peer? {
        state.withLockedValue { state in
            state.peers[peerID].flatMap { $0.isConnected ? $0.snapshot : nil }
        }
    }

    /// The connection frames for a peer go to now (nil while it switches to a tie-break's winner).
    func connection(to peerID: String) -> PeerConnection? {
        state.withLockedValue { $0.peers[peerID]?.active }
    }

    /// The address `peerID`'s connection comes from, as the per-address limits count it (see
    /// ``HandshakeSlots/source(of:)``); nil without a connection.
    func sourceAddress(of peerID: String) -> String? {
        connection(to: peerID).flatMap { Slots.source(of: $0.channel.remoteAddress) }
    }

    /// The connection frames for a peer go to now; while the peer is switching to the connection
    /// that won a tie-break (its `bye` closed the one in use, and the winner's handshake has not
    /// completed here yet), waits for the winner, at most ``Configuration/handshakeTimeout``. Nil
    /// when the peer is not connected, or the winner did not come. For what is bound to one
    /// connection (a resource transfer); messages go through ``send(_:to:)``.
    func connectionAfterSwitch(to peerID: String) async -> PeerConnection? {
        while true {
            if let active = connection(to: peerID) { return active }
            guard await waitForSwitch(of: peerID) else { return connection(to: peerID) }
        }
    }

    /// Waits until `peerID`'s switch to its tie-break winner (and the move of what was held for
    /// it) ended, either way. Returns false at once when the peer is not switching.
    private func waitForSwitch(of peerID: String) async -> Bool {
        var waiting = false
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiting = state.withLockedValue { state -> Bool in
                guard state.running, var record = state.peers[peerID] else { return false }
                guard case .waiting = record.link.wait(continuation) else { return false }
                state.peers[peerID] = record
                return true
            }
            if !waiting { continuation.resume() }
        }
        return waiting
    }

    /// Queues `frame` for `peer` on whichever connection is its own: the one in use, or the
    /// tie-break's winner that takes over from it (waited for, at most
    /// ``Configuration/handshakeTimeout``, behind the frames held for it). Paced like a socket:
    /// while the connection's outbox holds more than ``PeerConnection/outboxHighWatermark`` bytes
    /// it waits for the peer to read, at most ``Configuration/slowPeerGracePeriod``, so that
    /// what senders can queue for one peer stays within that mark plus one frame.
    /// - Throws: why the peer is not connected (the reason its last connection ended, when it
    ///   ended badly and recently), or ``PeerKitError/peerTooSlow(peer:queuedBytes:limit:grace:)``
    ///   when it did not read for the grace period (it is then disconnected).
    func send(_ frame: ByteBuffer, to peer: Peer) async throws(PeerKitError) {
        if configuration.sessions != nil, try await sendInSession(frame, to: peer) { return }
        var refusedBy: PeerConnection?
        while true {
            let destination = state.withLockedValue { state -> PeerLink.Destination in
                guard state.running, let index = state.peers.index(forKey: peer.id) else { return .none }
                return state.peers.values[index].link.destination
            }
            switch destination {
            case let .connection(connection):
                switch connection.enqueue(frame, below: PeerConnection.outboxHighWatermark) {
                case .queued:
                    return
                case .full:
                    try await connection.waitForRoom(grace: configuration.slowPeerGracePeriod, limit: configuration.maximumQueuedOutboundBytes)
                case .closed:
                    // The manager hears of a close before the connection refuses frames, so the
                    // next look goes elsewhere; the same connection twice means it ended.
                    if refusedBy === connection { throw connection.closeError ?? .connectionClosed(peer: peer.name) }
                    refusedBy = connection
                }
            case .afterSwitch:
                _ = await waitForSwitch(of: peer.id)
            case .none:
                throw recentFailure(of: peer.id) ?? .peerNotConnected(peer: peer.name)
            }
        }
    }

    /// Queues `frame` (a reply, or an error answering a request) for `peerID` on whichever
    /// connection is its own, without waiting: the dispatcher runs a peer's handlers only while
    /// its outbox has room (``outboxState(of:)``), so this adds at most one frame over the limit.
    /// Returns false when the peer is no longer connected (the frame is dropped: nobody is there
    /// to read it).
    @discardableResult
    func sendWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool {
        if configuration.sessions != nil, let sent = sendInSessionWithoutWaiting(frame, to: peerID) { return sent }
        var refusedBy: PeerConnection?
        while true {
            let route = state.withLockedValue { state -> PeerLink.Route in
                // In place: a copy stored back would copy what the state machine holds.
                guard state.running, let index = state.peers.index(forKey: peerID) else { return .notConnected }
                return state.peers.values[index].link.route(frame, limit: .max)
            }
            switch route {
            case let .send(connection):
                guard case .closed = connection.enqueue(frame, below: nil) else { return true }
                if refusedBy === connection { return false }
                refusedBy = connection
            case .held:
                return true
            case .full, .notConnected:
                return false
            }
        }
    }

    /// Whether the peer's outbox has room (holds less than
    /// ``Configuration/maximumQueuedOutboundBytes``, and, while the transceiver's
    /// ``OutboundBudget`` is spent, nothing charged to it, in its outbox or its session's
    /// retransmit tail): the dispatcher runs the handlers of a peer's messages only then, so a
    /// peer that does not read (or acknowledge) its replies gets no more made for it, and its
    /// further requests wait unread. Under a spent budget this holds for every peer together: the
    /// process holds at most the budget plus one reply per peer.
    func outboxState(of peerID: String) -> OutboxState {
        let probe = state.withLockedValue { state -> (connection: PeerConnection?, held: Int, sessionCharged: Int)? in
            // In place (see PeerRecord.outboxProbe()): this runs for every message handled.
            guard state.running, let index = state.peers.index(forKey: peerID) else { return nil }
            return state.peers.values[index].outboxProbe()
        }
        guard let (connection, held, sessionCharged) = probe else { return .disconnected }
        // Switching or suspended: the frames held for the winner and the session's tail count
        // alone. Both are charged to the budget, as is what waits in an outbox.
        guard let connection else {
            guard held < configuration.maximumQueuedOutboundBytes else { return .full }
            return (held > 0 || sessionCharged > 0) && outboundBudget.isSpent ? .full : .room
        }
        guard connection.queuedOutboundBytes < configuration.maximumQueuedOutboundBytes else { return .full }
        guard outboundBudget.isSpent else { return .room }
        return held > 0 || sessionCharged > 0 || connection.chargedOutboundBytes > 0 ? .full : .room
    }

    /// Sends `frame` to every connected peer, and holds it for each peer that is switching
    /// connections until the winner arrives. Does not wait: a peer whose outbox is full (it did
    /// not read ``Configuration/maximumQueuedOutboundBytes``) does not get it and is
    /// disconnected as too slow, so what a peer can make us queue stays within its limit plus
    /// one frame. The frame is one buffer in every peer's outbox, so it is not charged to the
    /// transceiver's ``OutboundBudget``: the memory it holds is bounded by the slowest peer's
    /// limit. Returns how many peers it went or will go to.
    func broadcast(_ frame: ByteBuffer) -> Int {
        let limit = configuration.maximumQueuedOutboundBytes
        var overflowed: [(peerID: String, connection: PeerConnection?, queued: Int)] = []
        var sessionFailures: [PeerConnection] = []
        let (targets, held) = withState { state -> ([(String, PeerConnection)], Int) in
            guard state.running else { return ([], 0) }
            var targets: [(String, PeerConnection)] = []
            var held = 0
            // A walk over the records' indices, which (unlike a loop over `state.peers.keys`)
            // holds no reference to the dictionary's storage: each record is changed in place,
            // not in a copy of the whole dictionary, and no array of the keys is made. Nothing
            // below adds or removes a record but the end of a session at its bound, which is done
            // after the walk.
            var sessionsToEnd: [String] = []
            var next = state.peers.startIndex
            while next != state.peers.endIndex {
                let index = next
                state.peers.formIndex(after: &next)
                if state.peers.values[index].sessionEndsAtBound {
                    sessionsToEnd.append(state.peers.keys[index])
                    continue
                }
                switch recordSessionFrame(frame, at: index, canWait: false, shared: true, state: &state) {
                case .kept:
                    held += 1
                    continue
                case let .refuse(close):
                    if let close { sessionFailures.append(close) }
                    continue
                case .full, .failed, .notConnected:
                    continue
                case .noSession:
                    break
                }
                // Without a session, routed by the peer's state machine, in place.
                switch state.peers.values[index].link.route(frame, limit: limit) {
                case let .send(connection): targets.append((state.peers.keys[index], connection))
                case .held: held += 1
                case .full: overflowed.append((state.peers.keys[index], nil, state.peers.values[index].link.heldBytes))
                case .notConnected: break
                }
            }
            for id in sessionsToEnd {
                // At the bound while away: the frame is not kept, and the session ends (the
                // peer is disconnected; its record may go).
                _ = recordSessionFrame(frame, for: id, canWait: false, shared: true, state: &state)
            }
            return (targets, held)
        }
        for connection in sessionFailures { connection.requestClose(.failed(sessionBoundFailure())) }
        var sent = held
        for (id, connection) in targets {
            switch connection.enqueue(frame, below: limit, shared: true) {
            case .queued:
                sent += 1
            case let .full(queued):
                overflowed.append((id, connection, queued))
            case .closed:
                if sendWithoutWaiting(frame, to: id) { sent += 1 }
            }
        }
        for (id, connection, queued) in overflowed {
            tooSlow(peerID: id, connection: connection, queuedBytes: queued)
        }
        return sent
    }

    /// Disconnects a peer whose outbox is full when a frame that cannot wait (a broadcast) is
    /// sent to it: it did not read what is queued for it.
    private func tooSlow(peerID: String, connection: PeerConnection?, queuedBytes: Int) {
        let failure = ConnectionStateMachine.Failure.tooSlow(queuedBytes: queuedBytes, limit: configuration.maximumQueuedOutboundBytes, grace: .zero)
        if let connection {
            connection.requestClose(.failed(failure))
            return
        }
        // Switching: the hold for the winner is full. The peer is disconnected; the winner,
        // should it still come, is a new connection.
        var waiters: [CheckedContinuation<Void, Never>] = []
        let timer = withState { state -> PeerTimer? in
            guard state.running, var record = state.peers[peerID], record.link.isSwitching else { return nil }
            let error = ConnectionStateMachine.CloseReason.failed(failure).error(peer: record.peer.name)
            waiters = record.link.abandon()
            let timer = record.switchTimer?.timer
            record.switchTimer = nil
            disconnected(&record, reason: error, state: &state)
            return timer
        }
        timer?.cancel()
        for waiter in waiters { waiter.resume() }
    }

    /// How many senders wait for `peerID`'s switch to its tie-break winner (a diagnostic for tests).
    func switchWaiterCount(of peerID: String) -> Int {
        state.withLockedValue { $0.peers[peerID]?.link.waiterCount ?? 0 }
    }

    /// Whether `peerID` is switching to its tie-break winner (a diagnostic for tests).
    func isSwitching(_ peerID: String) -> Bool {
        state.withLockedValue { $0.peers[peerID]?.link.isSwitching ?? false }
    }

    /// Why the last connection to `peerID` ended badly, if it did recently (the last
    /// ``State/maximumRecentFailures`` peers are remembered): what `send` to it reports.
    func recentFailure(of peerID: String) -> PeerKitError? {
        state.withLockedValue { $0.recentFailures[peerID] }
    }

    /// Every active connection.
    func activeConnections() -> [PeerConnection] {
        state.withLockedValue { $0.peers.values.compactMap(\.active) }
    }

    /// How many duplicate connections the tie-break has resolved.
    func tieBreakCount() -> Int {
        state.withLockedValue { $0.tieBreaks }
    }

    /// How many connections are open, including ones still in their handshake or being retired.
    func openConnectionCount() -> Int {
        state.withLockedValue { $0.connections.count }
    }

    /// Peers that are discovered or connected.
    func availablePeers() -> [Peer] {
        state.withLockedValue { Self.available($0) }
    }

    /// Peers that are connected.
    func connectedPeers() -> [Peer] {
        state.withLockedValue { $0.peers.values.filter(\.isConnected).map(\.snapshot).sorted(by: Self.byName) }
    }

    private static func available(_ state: State) -> [Peer] {
        state.peers.values.filter(\.isAvailable).map(\.snapshot).sorted(by: byName)
    }

    private static func byName(_ a: Peer, _ b: Peer) -> Bool {
        (a.name, a.id) < (b.name, b.id)
    }

    // MARK: Discovery

    /// Applies what discovery reports: dial new services, forget lost ones.
    func handle(_ event: DiscoveryEvent) {
        switch event {
        case let .found(service):
            serviceFound(service)
        case let .lost(key):
            serviceLost(key)
        case let .failed(error):
            logger.error("\(error)")
            withState { $0.emit(.error(error)) }
        case .recovered:
            logger.info("Discovery works again.")
        case .knownServicesListed:
            withState { $0.emit(.knownPeersListed) }
        case let .advertised(name):
            advertised(as: name)
        }
    }

    /// After a name collision the instance is renamed: new connections say the new name, and
    /// peers already connected are told, so that every peer shows the name it can find.
    private func advertised(as name: String) {
        logger.info("Advertised as \"\(LogSafe.text(name))\".")
        let open = withState { state -> [PeerConnection] in
            guard state.localHello.name != name else { return [] }
            state.localHello.name = name
            return Array(state.connections.values)
        }
        let frame = ConnectionStateMachine.ControlFrame.rename(name: name).encode()
        for connection in open where connection.remote != nil {
            connection.send(frame)
        }
    }

    private func serviceFound(_ service: DiscoveredService) {
        guard service.peerID != localPeerID else { return }
        if let refusal = configuration.security.refusal(of: service) {
            // It advertises another security mode or key: dialling it would only fail.
            if configuration.security.shouldLog(refusal, remote: service.key) { logger.notice("\(refusal)") }
            withState { $0.emit(.error(refusal)) }
            return
        }
        let own = ownEndpointFilter()
        var joined: (actions: [DialPlan.Action], generation: Int) = ([], 0)
        var newEndpoints = false
        let shouldDial = withState { state -> Bool in
            guard state.running else { return false }
            var record = state.services[service.key] ?? ServiceRecord(service: service)
            newEndpoints = state.services[service.key].map { Set($0.service.endpoints) != Set(service.endpoints) } ?? true
            record.service = service
            if var plan = record.plan {
                // A dial is under way: the addresses resolved since join it (Happy Eyeballs).
                joined = (plan.add(service.endpoints.filter { !own($0) }, stillResolving: service.isResolving), record.planGeneration)
                record.plan = plan
            }
            // Advertised anew while we were backing off: try again now, from the start.
            if let retry = record.dialer.advertised() { state.timersToCancel.append(retry) }
            if let peerID = service.peerID {
                if let previous = record.peerID, previous != peerID {
                    // The same instance name now belongs to another peer (a restarted process).
                    forget(serviceKey: service.key, of: previous, state: &state)
                }
                record.peerID = peerID
            }
            state.services[service.key] = record
            guard let peerID = record.peerID else { return !record.dialer.isDialling }
            // A peer known from its TXT record is available before it is connected.
            let info = service.txtRecord.filter { $0.key != "peerid" && $0.key != "proto" }
            let existing = state.peers[peerID]
            var peer = existing ?? PeerRecord(peer: Peer(id: peerID, name: service.name, discoveryInfo: info, isConnected: false))
            let wasAvailable = existing?.isAvailable ?? false
            peer.serviceKeys.insert(service.key)
            if existing != nil, Self.mergeDiscoveryInfo(info, into: &peer.peer), wasAvailable {
                // A peer met first through its own connection, or whose TXT record changed.
                state.peers[peerID] = peer
                state.emit(.availablePeersChanged(Self.available(state)))
            }
            if existing != nil, peer.active == nil, peer.peer.name != service.name {
                // Renamed (a collision) while not connected: show the name it can be found by.
                peer.peer = Peer(id: peerID, name: service.name, discoveryInfo: peer.peer.discoveryInfo, isConnected: false, fingerprint: peer.peer.fingerprint)
                if wasAvailable { state.peers[peerID] = peer; state.emit(.availablePeersChanged(Self.available(state))) }
            }
            state.peers[peerID] = peer
            if !wasAvailable {
                state.emit(.peerAdded(peer.snapshot))
                state.emit(.availablePeersChanged(Self.available(state)))
            }
            return peer.active == nil && !record.dialer.isDialling
        }
        if newEndpoints {
            // Where a peer can be dialled, for `--verbose` diagnostics on a LAN: avahi resolves
            // each address family on its own, so the addresses come one after the other.
            let addresses = service.endpoints.isEmpty ? "no address yet" : service.endpoints.map(\.description).joined(separator: ", ")
            logger.debug("\"\(LogSafe.text(service.name, maximumBytes: 80))\" is advertised at \(LogSafe.text(addresses, maximumBytes: 1024)).")
        }
        perform(joined.actions, key: service.key, generation: joined.generation)
        if shouldDial { dial(key: service.key) }
    }

    /// Merges a service's TXT pairs (without `peerid` and `proto`) into what is known of its peer,
    /// whichever way the peer was met first; returns whether anything changed. The TXT record
    /// is what the peer advertises now, so its values win.
    private static func mergeDiscoveryInfo(_ info: [String: String], into peer: inout Peer) -> Bool {
        let merged = peer.discoveryInfo.merging(info) { _, txt in txt }
        guard merged != peer.discoveryInfo else { return false }
        peer = Peer(id: peer.id, name: peer.name, discoveryInfo: merged, isConnected: peer.isConnected, fingerprint: peer.fingerprint)
        return true
    }

    private func serviceLost(_ key: String) {
        let attempts = withState { state -> [any Channel] in
            guard var record = state.services.removeValue(forKey: key) else { return [] }
            record.cancelRetry(&state)
            if let peerID = record.peerID {
                forget(serviceKey: key, of: peerID, state: &state)
            }
            return Array(record.attempts.values)
        }
        // A dial under way ends with the service: its attempts are closed (not yet connected).
        for channel in attempts { channel.close(promise: nil) }
    }

    /// The service `key` no longer leads to `peerID`; the peer is removed when nothing else keeps it available.
    private func forget(serviceKey key: String, of peerID: String, state: inout State) {
        guard var peer = state.peers[peerID] else { return }
        peer.serviceKeys.remove(key)
        if peer.isAvailable {
            state.peers[peerID] = peer
        } else {
            state.peers[peerID] = nil
            state.emit(.peerRemoved(peer.snapshot))
            state.emit(.availablePeersChanged(Self.available(state)))
        }
    }

    // MARK: Dialling

    /// Dials the service `key` unless it is being dialled or its peer is connected: every
    /// endpoint, in the manner of Happy Eyeballs (``DialPlan``). Endpoints that lead back to this
    /// transceiver itself are left out.
    private func dial(key: String) {
        let own = ownEndpointFilter()
        var skipped: [PeerEndpoint] = []
        let (actions, generation) = withState { state -> ([DialPlan.Action], Int) in
            guard state.running, var record = state.services[key], !record.dialer.isDialling else { return ([], 0) }
            if let peerID = record.peerID, state.peers[peerID]?.active != nil { return ([], 0) }
            skipped = record.service.endpoints.filter(own)
            let endpoints = record.service.endpoints.filter { !own($0) }
            // Only addresses of our own so far: dialled when discovery reports another one.
            guard !endpoints.isEmpty || record.service.endpoints.isEmpty else { return ([], 0) }
            if let retry = record.dialer.startDial().cancel { state.timersToCancel.append(retry) }
            record.planGeneration += 1
            var plan = DialPlan(endpoints: endpoints, lingers: record.service.isResolving)
            let actions = plan.start()
            record.plan = plan
            state.services[key] = record
            return (actions, record.planGeneration)
        }
        for endpoint in skipped {
            logger.debug("\(endpoint) leads back to this transceiver itself (an address of this host, and our port); it is not dialled.")
        }
        perform(actions, key: key, generation: generation)
    }

    /// Whether an endpoint leads back to this transceiver: an address of this host's and the
    /// port of our listener (when it is bound to every address).
    private func ownEndpointFilter() -> @Sendable (PeerEndpoint) -> Bool {
        guard let port = listened.withLockedValue({ $0.wildcardPort }) else { return { _ in false } }
        let addresses = LocalAddresses.current()
        return { LocalAddresses.isOwn($0, addresses: addresses, port: port) }
    }

    /// Does what the dial plan of service `key` (dial `generation`) asked.
    private func perform(_ actions: [DialPlan.Action], key: String, generation: Int) {
        for action in actions {
            switch action {
            case let .connect(endpoint):
                connect(key: key, endpoint: endpoint, generation: generation)
            case let .armTimer(delay):
                let arming = withState { state -> Int? in
                    guard var record = state.services[key], record.planGeneration == generation, record.plan != nil else { return nil }
                    record.planTimerArming += 1
                    state.services[key] = record
                    return record.planTimerArming
                }
                guard let arming else { continue }
                _ = configuration.clock.schedule(on: timerLoop, in: delay) {
                    self.planTimerFired(key: key, generation: generation, arming: arming)
                }
            case let .cancel(endpoints):
                let channels = withState { state -> [any Channel] in
                    guard var record = state.services[key], record.planGeneration == generation else { return [] }
                    defer { state.services[key] = record }
                    return endpoints.compactMap { record.attempts.removeValue(forKey: $0) }
                }
                for channel in channels { channel.close(promise: nil) }
            case let .failed(reasons):
                let refused = withState { state -> Bool in
                    guard var record = state.services[key], record.planGeneration == generation else { return false }
                    defer { state.services[key] = record }
                    let refused = record.plan?.everyEndpointRefused ?? false
                    record.plan = nil
                    record.attempts = [:]
                    return refused
                }
                dialFailed(key: key, reason: reasons.joined(separator: "; "), everyEndpointRefused: refused)
            }
        }
    }

    /// Applies an event to the current dial plan of service `key`, when `generation` is current,
    /// and performs what it returns.
    private func updatePlan(key: String, generation: Int, _ event: (inout DialPlan) -> [DialPlan.Action]) {
        let actions = withState { state -> [DialPlan.Action] in
            guard state.running, var record = state.services[key], record.planGeneration == generation, var plan = record.plan else { return [] }
            let actions = event(&plan)
            record.plan = plan
            state.services[key] = record
            return actions
        }
        perform(actions, key: key, generation: generation)
    }

    private func planTimerFired(key: String, generation: Int, arming: Int) {
        let current = state.withLockedValue { $0.services[key]?.planTimerArming == arming }
        guard current else { return }
        updatePlan(key: key, generation: generation) { $0.timerFired() }
    }

    /// One attempt of a dial: connects to `endpoint` and reports the outcome to the dial plan.
    ///
    /// The attempt starts on the event loop its channel will use, so that the outcome is handled
    /// there before anything the channel reads: the dial plan learns that the attempt connected
    /// before its handshake can complete. Started from another thread, the outcome's handler could
    /// be registered only after a complete handshake (a thread descheduled for a few milliseconds
    /// on a loaded machine), and a dial that had meanwhile ended (the transceiver stopping) closed
    /// the connection under the peer's session, discarding what was queued on it and the bye.
    /// (A test transport's network picks its own loops and is driven by its own clock: it is
    /// called at once.)
    private func connect(key: String, endpoint: PeerEndpoint, generation: Int) {
        let loop = group.next()
        if configuration.transport != nil || loop.inEventLoop {
            connect(key: key, endpoint: endpoint, generation: generation, on: loop)
        } else {
            loop.execute { self.connect(key: key, endpoint: endpoint, generation: generation, on: loop) }
        }
    }

    private func connect(key: String, endpoint: PeerEndpoint, generation: Int, on loop: any EventLoop) {
        let connected: EventLoopFuture<any Channel>
        let clock = configuration.clock
        let connectTimeout = Duration.nanoseconds(configuration.connectTimeout.nanoseconds)
        // The attempt's channel is kept, so that it can be closed when another attempt wins.
        let register: @Sendable (any Channel) -> Void = { channel in
            let current = self.withState { state -> Bool in
                guard state.running, var record = state.services[key], record.planGeneration == generation, record.plan != nil else { return false }
                record.attempts[endpoint] = channel
                state.services[key] = record
                return true
            }
            if !current { channel.close(promise: nil) }
        }
        if let transport = configuration.transport {
            let box = NIOLockedValueBox<(any Channel)?>(nil)
            connected = transport.connect(to: endpoint, group: group) { channel in
                box.withLockedValue { $0 = channel }
                register(channel)
                try self.configurePipeline(channel, direction: .outbound, serviceKey: key)
            }.timingOut(after: connectTimeout, clock: clock, on: group.next(), endpoint: endpoint)
                .flatMapThrowing { () throws -> any Channel in
                    guard let channel = box.withLockedValue({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                    return channel
                }
        } else {
            let bootstrap = ClientBootstrap(group: loop)
                // With a clock other than the real one, the connect timeout is that clock's (below).
                .connectTimeout(clock.isReal ? configuration.connectTimeout : .hours(24))
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if !clock.isReal {
                            _ = clock.schedule(on: channel.eventLoop, in: connectTimeout) {
                                if !channel.isActive { channel.close(promise: nil) }
                            }
                        }
                        register(channel)
                        try self.configurePipeline(channel, direction: .outbound, serviceKey: key)
                    }
                }
            // Discovery resolves to address literals (a link-local one with its zone): dialling
            // one directly skips getaddrinfo and NIO's own Happy Eyeballs.
            if let address = endpoint.socketAddress {
                connected = bootstrap.connect(to: address)
            } else {
                connected = bootstrap.connect(host: endpoint.host, port: endpoint.port)
            }
        }
        connected.whenComplete { result in
            switch result {
            case let .success(channel):
                self.configuration.metrics.dialled.increment()
                let actions = self.withState { state -> [DialPlan.Action]? in
                    guard state.running, var record = state.services[key], record.planGeneration == generation, var plan = record.plan else { return nil }
                    record.attempts[endpoint] = nil
                    let actions = plan.attemptConnected(endpoint)
                    // The dial is over: the handshake decides the rest.
                    record.plan = nil
                    state.services[key] = record
                    return actions
                }
                // Connected after the dial ended (another attempt won, or the service is gone).
                guard let actions else { channel.close(promise: nil); return }
                self.perform(actions, key: key, generation: generation)
            case let .failure(error):
                self.configuration.metrics.dialFailures.increment()
                self.withState { state in
                    guard var record = state.services[key], record.planGeneration == generation else { return }
                    record.attempts[endpoint] = nil
                    state.services[key] = record
                }
                // Described before the lock: the error may come from a transport of the user's.
                let reason = "connecting to \(endpoint) failed: \(Self.describe(error))"
                let refused = Self.isRefusal(error)
                self.updatePlan(key: key, generation: generation) { $0.attemptFailed(endpoint, reason: reason, refused: refused) }
            }
        }
    }

    /// Every endpoint failed, or the connection closed before its handshake completed: try again
    /// after the back-off delay while the service is still discovered. The first failure of an
    /// episode is logged (and published); the following attempts only at debug level.
    ///
    /// A suspended peer whose every endpoint refused the connection (`everyEndpointRefused`) is
    /// gone: its connection closed without a bye and nothing listens where it did, so its
    /// process ended and its session cannot resume. The session ends at once with
    /// ``PeerKitError/peerExited(peer:refusals:)`` (``PeerRecord/exited(_:)``), rather than at the
    /// end of its resume window, and the peer is redialled with the back-off of a peer that is
    /// not suspended, in case it starts again.
    private func dialFailed(key: String, reason: String, error: PeerKitError? = nil, everyEndpointRefused: Bool = false) {
        var exited: PeerKitError?
        let failure = withState { state -> (name: String, attempt: Int, delay: Duration)? in
            guard state.running, var record = state.services[key] else { return nil }
            if everyEndpointRefused, let peerID = record.peerID, var peer = state.peers[peerID],
               let ended = peer.exited(.peerExited(peer: peer.safeName, refusals: reason)) {
                exited = ended.error
                endSession(ended, of: &peer, state: &state)
            }
            let suspended = record.peerID.map { state.peers[$0]?.session?.isSuspended == true } ?? false
            let (attempt, redial) = record.dialer.failed(policy: dialPolicy, random: Double.random(in: 0..<1), peerSuspended: suspended, arming: state.nextRetryArming())
            state.retriesToArm.append((key, redial.delay, redial.arming))
            state.services[key] = record
            if attempt == 0, let error { state.emit(.error(error)) }
            return (record.service.name, attempt, redial.delay)
        }
        if let exited { logger.notice("\(exited)") }
        guard let failure else { return }
        let name = LogSafe.text(failure.name, maximumBytes: 80)
        // A reason may be an error's sentence; the lines below go on after it.
        let reason = reason.hasSuffix(".") ? String(reason.dropLast()) : reason
        if failure.attempt == 0 {
            logger.notice("Cannot reach \"\(name)\": \(reason). Retrying with back-off from \(configuration.backoff.initial.peerKitSeconds) up to \(configuration.backoff.maximum.peerKitSeconds) between attempts; a new advertisement retries at once.")
        } else {
            logger.debug("Attempt \(failure.attempt + 1) to reach \"\(name)\" failed: \(reason); next in \(failure.delay.peerKitSeconds).")
        }
    }

    /// The dialler's delays: the configured back-off, capped for services reached before and for
    /// suspended peers.
    private var dialPolicy: ServiceDialer<PeerTimer>.Policy {
        let handshakeTimeout = Duration.nanoseconds(configuration.handshakeTimeout.nanoseconds)
        return .init(backoff: configuration.backoff, reachedCap: Self.lostPeerRedialCap, suspendedInterval: Self.suspendedPeerRedialInterval,
                     lateHelloInterval: handshakeTimeout * (Self.resumingHandshakeFactor + 1) + Self.suspendedPeerRedialInterval)
    }

    /// The longest wait between redials of a service we were once connected to (while it is still
    /// discovered): a peer on a link that went down for a while is back within this long after the
    /// link returns, instead of after the full ``PeerConfiguration/reconnectBackoff`` maximum. A
    /// service that goes away for good is withdrawn from discovery and no longer redialled.
    static let lostPeerRedialCap: Duration = .seconds(2)

    /// The longest wait between redials of a suspended peer (feature resume): its session is
    /// waiting, with its user's sends queued, so it is redialled every half second, without
    /// back-off, until it is back or its ``PeerConfiguration/sessionResumeWindow`` ends. Together
    /// with the one-second ``PeerConfiguration/connectTimeout``, the peer is back within about
    /// 1.5 s of its link returning (`make test-lan` scenario 13 holds it to 2 s).
    static let suspendedPeerRedialInterval: Duration = .milliseconds(500)

    /// How many times ``PeerConfiguration/handshakeTimeout`` a redial of a suspended peer (feature
    /// resume) waits for the peer's hello: 3, so 15 s by default. The peer is known and alive (it
    /// accepted the connection), and its session waits with its user's sends; a peer that is slow
    /// to answer is one whose machine is loaded (`make stress`: a debug mesh of 64 processes on 2
    /// cores, where the broadcasting node took over 5 s to accept), and timing it out at 5 s and
    /// starting over only loaded it further, until its resume window ran out.
    static let resumingHandshakeFactor = 3

    /// Redial a peer's services soon after its connection was lost; `heardUsLate`: see
    /// ``ServiceDialer/connectionLost(policy:random:arming:heardUsLate:)``.
    private func scheduleRedial(_ keys: Set<String>, heardUsLate: Bool = false, state: inout State) {
        for key in keys {
            guard var record = state.services[key],
                  let redial = record.dialer.connectionLost(policy: dialPolicy, random: Double.random(in: 0..<1), arming: state.nextRetryArming(), heardUsLate: heardUsLate) else { continue }
            state.retriesToArm.append((key, redial.delay, redial.arming))
            state.services[key] = record
        }
    }

    // MARK: Pipeline

    /// Sets up an accepted connection, or closes it at once when a connection limit is reached.
    /// When every handshake slot is taken, the oldest pending handshake of the busiest address is
    /// closed to make room (see ``HandshakeSlots``); a connection from an address with
    /// ``Configuration/maximumPendingHandshakesPerAddress`` pending handshakes is closed at once.
    private func configureInbound(_ channel: any Channel) throws {
        // The check and the reservation happen under one lock, so that a burst of accepted
        // connections cannot all pass the check before any of them counts.
        let channelID = ObjectIdentifier(channel)
        let source = Slots.source(of: channel.remoteAddress)
        let now = configuration.clock.now(on: channel.eventLoop)
        typealias Refusal = (count: Int, limit: Int, what: String, first: Bool)
        typealias Outcome = (refusal: Refusal?, resumedAfter: Int, slot: Slots.Decision, report: Slots.Report?)
        let outcome = withState { state -> Outcome in
            let open = state.connections.count + state.accepting.count
            if open >= state.maximumConnections {
                state.refusedInEpisode += 1
                let what = state.maximumConnections < configuration.maximumConnections
                    ? "PeerConfiguration.maximumConnections, lowered to fit the descriptor limit"
                    : "PeerConfiguration.maximumConnections"
                return ((open, state.maximumConnections, what, state.refusedInEpisode == 1), 0, .refuse, nil)
            }
            let (slot, report) = state.pendingHandshakes.admit(channelID, handle: channel, from: source, now: now)
            if case .refuse = slot { return (nil, 0, slot, report) }
            state.accepting.insert(channelID)
            defer { state.refusedInEpisode = 0 }
            return (nil, state.refusedInEpisode, slot, report)
        }
        if let report = outcome.report { logHandshakeEpisode(report) }
        if let refusal = outcome.refusal {
            configuration.metrics.refused(.connectionLimit)
            if refusal.first {
                logger.warning("Refusing new connections: \(refusal.count) connections are open, the limit (\(refusal.what) = \(refusal.limit)). Connections are accepted again when one ends; this is logged once until then.")
            }
            channel.close(promise: nil)
            return
        }
        switch outcome.slot {
        case .refuse:
            configuration.metrics.refused(.handshakeLimit)
            channel.close(promise: nil)
            return
        case let .admitEvicting(evicted):
            configuration.metrics.refused(.handshakeLimit)
            evicted.close(promise: nil)
        case .admit:
            break
        }
        configuration.metrics.accepted.increment()
        if outcome.resumedAfter > 0 {
            logger.notice("Accepting connections again after refusing \(outcome.resumedAfter) over the limits.")
        }
        // Until its connection object exists the channel counts in `accepting`; until its
        // handshake completes, in `pendingHandshakes`. A channel that closes early frees both.
        channel.closeFuture.whenComplete { _ in
            self.withState { state in
                state.accepting.remove(channelID)
                state.pendingHandshakes.closed(channelID)
            }
        }
        try configurePipeline(channel, direction: .inbound, serviceKey: nil)
    }

    private typealias Slots = HandshakeSlots<ObjectIdentifier, any Channel>

    /// Whether `connection` was closed to make room for another handshake (its TLS handler then
    /// reports a failed handshake, which is not news: the eviction was counted).
    private func wasEvicted(_ connection: PeerConnection) -> Bool {
        state.withLockedValue { $0.pendingHandshakes.wasEvicted(ObjectIdentifier(connection.channel)) }
    }

    /// A stranger's connection failed its handshake: counted in the episode, whose first failure
    /// is logged whole (an evicted connection was counted when it was evicted); the summaries
    /// count failures by what went wrong, without the peer's address and port.
    private func handshakeFailed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason, error: PeerKitError) {
        let id = ObjectIdentifier(connection.channel)
        let source = Slots.source(of: connection.channel.remoteAddress)
        let what: String
        switch reason {
        case let .failed(failure): what = failure.reason
        case let .transportError(text): what = text
        case let .peerFailed(text): what = "it sent peerkit.error: " + LogSafe.text(text, maximumBytes: 120)
        case .connectionLost: what = "it closed the connection"
        default: what = error.description
        }
        let report = withState { state -> Slots.Report? in
            guard !state.pendingHandshakes.wasEvicted(id) else { return nil }
            // The first failure is told whole: the error names the peer and what went wrong.
            return state.pendingHandshakes.failed(from: source, reason: what, sentence: error.description)
        }
        if let report { logHandshakeEpisode(report) }
    }

    /// Logs the first line of an episode of refused, evicted or failed handshakes, and its
    /// counts every ``HandshakeSlots/summaryInterval`` while it goes on.
    private func logHandshakeEpisode(_ report: Slots.Report) {
        switch report {
        case let .episodeStarted(line):
            logger.warning("\(line)")
        }
        let interval = Duration.nanoseconds(Slots.summaryInterval.nanoseconds)
        // Weak, so that a stopped manager goes; made only while handshakes are refused, so the
        // slow path of a weakly referenced object (see configurePipeline) is paid only then.
        _ = configuration.clock.schedule(on: timerLoop, in: interval) { [weak self] in
            self?.handshakeSummaryDue()
        }
    }

    private func handshakeSummaryDue() {
        guard let line = withState({ $0.pendingHandshakes.summary() }) else { return }
        logger.notice("\(line)")
        let interval = Duration.nanoseconds(Slots.summaryInterval.nanoseconds)
        _ = configuration.clock.schedule(on: timerLoop, in: interval) { [weak self] in
            self?.handshakeSummaryDue()
        }
    }

    private func configurePipeline(_ channel: any Channel, direction: TieBreak.Direction, serviceKey: String?) throws {
        let (localHello, resumes) = state.withLockedValue { state in
            (state.localHello, serviceKey.flatMap { state.services[$0]?.peerID }.map { state.peers[$0]?.session?.isSuspended == true } ?? false)
        }
        let stateMachine = ConnectionStateMachine.Configuration(
            localHello: localHello,
            heartbeatInterval: configuration.heartbeatInterval,
            peerTimeout: configuration.peerTimeout,
            handshakeTimeout: resumes ? configuration.handshakeTimeout * Self.resumingHandshakeFactor : configuration.handshakeTimeout,
            maximumFrameLength: configuration.maximumFrameLength,
            maximumQueuedOutboundBytes: configuration.maximumQueuedOutboundBytes,
            slowPeerGracePeriod: configuration.slowPeerGracePeriod,
            maximumTotalQueuedOutboundBytes: configuration.maximumTotalQueuedOutboundBytes,
            requiresAuthenticatedPeerID: configuration.security.security.boundPeerID != nil,
            drivesHeartbeat: direction == .outbound
        )
        let limit = FrameLengthLimit(configuration.maximumHandshakeFrameLength)
        let inboundLimit = configuration.maximumQueuedInboundBytes
        let metrics = configuration.metrics
        let clock = configuration.clock
        let outboundLimit = configuration.maximumQueuedOutboundBytes
        let inboundBudget = self.inboundBudget
        let outboundBudget = self.outboundBudget
        // Not `self`, strongly or weakly: a weakly referenced object takes the slow path for every
        // retain and release (its side table), and the manager is retained for every message
        // sent (3 % of the CPU per 100 B message, measured).
        let messagesBox = self.messagesBox
        let handler = PeerConnectionHandler(configuration: stateMachine, frameLimit: limit, ticker: heartbeats, metrics: metrics, delegate: self) { channel in
            let connection = PeerConnection(
                channel: channel, direction: direction, serviceKey: serviceKey,
                maximumQueuedInboundBytes: inboundLimit, inboundBudget: inboundBudget, maximumQueuedOutboundBytes: outboundLimit,
                outboundBudget: outboundBudget, metrics: metrics, clock: clock,
                roomAvailable: { messagesBox.withLockedValue { $0 }?.outboxHasRoom() }
            )
            let running = self.withState { state -> Bool in
                guard state.running else { return false }
                let id = ObjectIdentifier(connection)
                state.connections[id] = connection
                state.accepting.remove(ObjectIdentifier(channel))
                return true
            }
            if !running { channel.close(promise: nil) }
            return connection
        }
        let firstBytesTimeout = direction == .inbound ? (configuration.preHandshakeTimeout, clock) : nil
        try PeerPipeline.configure(channel, security: configuration.security, inbound: direction == .inbound, firstBytesTimeout: firstBytesTimeout, limit: limit, handler: handler)
    }

    // MARK: PeerConnectionDelegate

    func connectionEstablished(_ connection: PeerConnection, remote: Hello) {
        withState { $0.pendingHandshakes.completed(ObjectIdentifier(connection.channel)) }
        // The admission hook (when there is one) decides before the peer is reported connected.
        let waiting = connection.peer.map { peer in
            configuration.admission.begin(
                connection, peer: peer,
                admitted: { self.admitted(connection, remote: remote) },
                deliver: { self.connection(connection, received: $0) }
            )
        } ?? false
        if !waiting { admitted(connection, remote: remote) }
    }

    /// The peer on `connection` completed its handshake and was admitted: it is connected.
    private func admitted(_ connection: PeerConnection, remote: Hello) {
        var switched: (waiters: [CheckedContinuation<Void, Never>], timer: PeerTimer?)?
        var resume: (frame: ByteBuffer, resumed: Bool)?
        var tieBreak: (peer: Peer, newWins: Bool, peerLostIt: Bool)?
        let now = configuration.clock.now(on: connection.channel.eventLoop)
        connection.markEstablished(at: now)
        let interval = configuration.heartbeatInterval
        let (retired, reached) = withState { state -> (PeerConnection?, (name: String, attempts: Int)?) in
            guard state.running else { return (nil, nil) }
            // Connected again: an earlier failure is no longer why it cannot be sent to.
            state.recentFailures[remote.peerID] = nil
            var reached: (String, Int)?
            if let key = connection.serviceKey, var service = state.services[key] {
                let failed = service.dialer.reached()
                if failed > 0 { reached = (service.service.name, failed) }
                service.peerID = remote.peerID
                state.services[key] = service
            }
            let existing = state.peers[remote.peerID]
            let wasAvailable = existing?.isAvailable ?? false
            var record = existing ?? PeerRecord(peer: Peer(id: remote.peerID, name: remote.name, isConnected: true))
            var info = record.peer.discoveryInfo
            info.merge(remote.discoveryInfo ?? [:]) { _, hello in hello }
            record.peer = Peer(id: remote.peerID, name: remote.name, discoveryInfo: info, isConnected: true, fingerprint: connection.peer?.fingerprint)
            if let key = connection.serviceKey, state.services[key] != nil { record.serviceKeys.insert(key) }
            if connection.direction == .inbound { record.dialsUs = true }
            let suspended = sessionArrives(on: connection, remote: remote, record: &record, state: &state)
            defer { state.peers[remote.peerID] = record }
            state.queue(.established(connection))
            // Feature resume: every connection starts with peerkit.resume; the one that becomes
            // the peer's writes no session frame until the peer's resume arrives on it.
            defer {
                if let frame = record.sessionConnected(connection) { resume = (SessionFrame.resume(frame).encode(), suspended) }
                if record.link.current === connection { connection.setSessionShare(record.session?.share) }
            }

            // An existing connection that went quiet, or that is a heartbeat interval older than this
            // one, is presumed lost: the peer dialled because it lost it (TieBreak).
            let presumedLost = { (existing: PeerConnection) in
                TieBreak.presumedLost(quiet: existing.isQuiet, establishedAt: existing.establishedAt, now: now, heartbeatInterval: interval)
            }
            switch record.link.established(connection, direction: connection.direction, localPeerID: localPeerID, remotePeerID: remote.peerID, presumedLost: presumedLost) {
            case .connected:
                // A suspended peer is back: it was connected all along, for the user.
                if !wasAvailable { state.emit(.peerAdded(record.snapshot)) }
                state.emit(suspended ? .peerResumed(record.snapshot) : .peerConnected(record.snapshot))
                state.peers[remote.peerID] = record
                state.emit(.availablePeersChanged(Self.available(state)))
                return (nil, reached)
            case let .retire(loser, peerLostIt):
                state.tieBreaks += 1
                tieBreak = (record.peer, loser !== connection, peerLostIt)
                return (loser, reached)
            case let .switched(waiters, generation):
                // The connection that won the tie-break arrived: nothing changed for the user.
                var timer: PeerTimer?
                if let armed = record.switchTimer, armed.generation == generation {
                    timer = armed.timer
                    record.switchTimer = nil
                }
                switched = (waiters, timer)
                return (nil, reached)
            }
        }
        if let resume {
            connection.send(resume.frame)
            if resume.resumed { logger.info("\(connection) is back within its resume window; what it did not receive is sent again.") }
        }
        if let tieBreak, let retired {
            logger.debug("Two connections to \(tieBreak.peer); keeping the \(tieBreak.newWins ? "new" : "existing") one.")
            // Messages on the winner wait until nothing more can arrive on the loser.
            let peerID = remote.peerID
            retired.channel.closeFuture.whenComplete { _ in self.retiredConnectionFinished(retired, of: peerID) }
        }
        if let switched {
            switched.timer?.cancel()
            flushHeldFrames(of: remote.peerID, to: connection)
            for waiter in switched.waiters { waiter.resume() }
        }
        if let reached {
            logger.notice("Reached \"\(LogSafe.text(reached.name, maximumBytes: 80))\" again after \(reached.attempts) failed attempts.")
        }
        retired?.retire(peerLostIt: tieBreak?.peerLostIt ?? false)
    }

    /// Moves the frames held for `peerID` during its switch to `winner`, in order, until none is
    /// left; frames sent meanwhile join the hold behind them (``PeerStateMachine/takeHeldFrames(for:)``).
    private func flushHeldFrames(of peerID: String, to winner: PeerConnection) {
        while true {
            let (frames, waiters) = state.withLockedValue { state -> (CircularBuffer<ByteBuffer>, [CheckedContinuation<Void, Never>]) in
                guard var record = state.peers[peerID] else { return ([], []) }
                defer { state.peers[peerID] = record }
                return record.link.takeHeldFrames(for: winner)
            }
            for waiter in waiters { waiter.resume() }
            if frames.isEmpty { return }
            for frame in frames where !winner.enqueue(frame, below: nil).isQueued {
                // The winner ended meanwhile: what is left goes wherever the peer is now.
                sendWithoutWaiting(frame, to: peerID)
            }
        }
    }

    func connectionRenamed(_ connection: PeerConnection, remote: Hello) {
        let renamed = withState { state -> Peer? in
            guard state.running, var record = state.peers[remote.peerID], record.active === connection else { return nil }
            let before = record.peer
            record.peer = Peer(id: remote.peerID, name: remote.name, discoveryInfo: record.peer.discoveryInfo, isConnected: true, fingerprint: record.peer.fingerprint)
            state.peers[remote.peerID] = record
            state.emit(.availablePeersChanged(Self.available(state)))
            return before
        }
        if let renamed { logger.info("\(renamed) is now called \"\(LogSafe.text(remote.name))\".") }
    }

    func connection(_ connection: PeerConnection, received envelopes: [Envelope]) {
        guard let peer = connection.peer else {
            for envelope in envelopes { connection.inboundDropped(envelope) }
            return
        }
        let numbers = configuration.sessions != nil && connection.offersResumableSession
        // Frames for handlers, `envelopes[run]`, are taken in together with one lock; any other
        // frame is carried out where it stands, after the run before it was taken in.
        var run = envelopes.startIndex..<envelopes.startIndex
        /// Takes in the run before the frame at `index`, which is not for handlers; the next run
        /// starts after it.
        func endRun(at index: Int) {
            take(envelopes[run], numbered: numbers, from: peer, on: connection)
            run = index + 1..<index + 1
        }
        for index in envelopes.indices {
            let envelope = envelopes[index]
            if configuration.admission.hold(envelope, on: connection) {
                endRun(at: index)
                continue
            }
            // Only the protocol's own types (all `peerkit.…`) can be session control frames, and
            // only they are looked up in `passedUp`: an application's frame is told by one prefix.
            let isProtocols = envelope.isControl
            if numbers && isProtocols {
                let control: SessionFrame?
                do throws(ConnectionStateMachine.Failure) {
                    control = try SessionFrame.parse(envelope)
                } catch {
                    endRun(at: index)
                    connection.inboundDropped(envelope)
                    connection.requestClose(.failed(error))
                    continue
                }
                if let control {
                    endRun(at: index)
                    connection.inboundDropped(envelope)
                    sessionControl(control, on: connection, from: peer)
                    continue
                }
            }
            let isResource = isProtocols && envelope.type.hasPrefix(EnvelopeType.resourcePrefix)
            guard isResource || (isProtocols && EnvelopeType.passedUp.contains(envelope.type)) else {
                run = run.lowerBound..<index + 1
                continue
            }
            endRun(at: index)
            if isResource {
                resourcesBox.withLockedValue { $0 }?.received(envelope, from: peer, on: connection)
            } else {
                // A feature's control frame goes through the event queue, so that the layer above
                // sees it after the peer connected and before it disconnected; dropped once it
                // disconnected.
                withState { state in
                    guard state.running, state.peers[peer.id]?.active != nil else { return }
                    state.queue(.control(envelope, from: peer, on: connection))
                }
            }
        }
        take(envelopes[run], numbered: numbers, from: peer, on: connection)
    }

    /// Takes in `frames`, frames for handlers from one read burst, with one lock: each is
    /// numbered by the peer's session (when `numbered` and it carries a number), held (the peer
    /// may still be writing on a tie-break's loser, and what it wrote there comes first) or
    /// handed to the dispatcher, which takes them with one lock too; then acknowledges them. A
    /// frame that breaks the session's protocol fails the connection, and those after it are
    /// taken in as they would be had they come alone.
    private func take(_ frames: ArraySlice<Envelope>, numbered: Bool, from peer: Peer, on connection: PeerConnection) {
        var start = frames.startIndex
        while start < frames.endIndex {
            let first = start
            // What goes to the dispatcher: `frames[first..<end]` while every frame goes, else a copy.
            var end = first
            var copy: [Envelope]?
            var dropped: [Envelope] = []
            var acknowledge: UInt64?
            var armTimer = false
            var violation: (envelope: Envelope, reason: String)?
            start = withState { state -> Int in
                // In place: the record is not copied (see PeerRecord.recordInSession).
                let record = state.peers.index(forKey: peer.id)
                for position in first..<frames.endIndex {
                    let envelope = frames[position]
                    let outcome: PeerRecord.Numbered?  // nil: held
                    switch (numbered && SessionFrame.isNumbered(envelope), record) {
                    case (true, nil):
                        outcome = .drop
                    case let (true, record?):
                        let (numberedOutcome, held) = state.peers.values[record].receiveNumbered(envelope, on: connection)
                        outcome = held ? nil : numberedOutcome
                    case (false, nil):
                        outcome = .deliver(acknowledge: nil, armTimer: false)
                    case let (false, record?):
                        let held = state.peers.values[record].holdInbound(envelope, on: connection)
                        outcome = held ? nil : .deliver(acknowledge: nil, armTimer: false)
                    }
                    if case let .deliver(acknowledged, arm) = outcome {
                        if copy == nil { end = position + 1 } else { copy?.append(envelope) }
                        acknowledge = acknowledged ?? acknowledge
                        armTimer = armTimer || arm
                        continue
                    }
                    if copy == nil { copy = Array(frames[first..<end]) }
                    if case .drop = outcome { dropped.append(envelope) }
                    if case let .violation(reason) = outcome {
                        violation = (envelope, reason)
                        return position + 1
                    }
                }
                return frames.endIndex
            }
            let handed = copy.map { $0[...] } ?? frames[first..<end]
            if !handed.isEmpty { messagesBox.withLockedValue { $0 }?.enqueue(handed, from: peer, on: connection) }
            // Each acknowledgement counts every frame before it: the latest says all.
            if let acknowledge { connection.send(SessionFrame.ack(received: acknowledge).encode()) }
            if armTimer { armAcknowledgementTimer(for: peer.id) }
            for envelope in dropped { connection.inboundDropped(envelope) }
            if let violation {
                connection.inboundDropped(violation.envelope)
                connection.fail(violation.reason)
            }
        }
    }

    func connection(_ connection: PeerConnection, received chunk: ResourceChunk) {
        // A chunk needs an accepted offer, which the admission hook's hold never lets through.
        guard let peer = connection.peer else { return }
        resourcesBox.withLockedValue { $0 }?.received(chunk, from: peer, on: connection)
    }

    func connectionClosed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason) {
        // A pending handshake closed to make room for another was counted, and is not news.
        let evicted = connection.remote == nil && wasEvicted(connection)
        if !evicted { count(reason) }
        let error = reason.error(peer: connection.description)
        // A wrong key, a plaintext peer meeting a TLS one, a refusal by the admission hook: not
        // redialled until the peer is discovered again, and logged once per host, kind and episode.
        let refused = error?.isSecurityRefusal == true
        // But a TLS handshake that the peer cut off without an alert (`securityHandshakeFailed`:
        // it reset or closed the connection) is no verdict on our key, since a peer with another
        // key says so with an alert. It was busy (its pending handshakes at their limit, see
        // HandshakeSlots: ten clients dialling one daemon at once from one address) or
        // restarting, so a dial of ours is retried with back-off, as a failed dial is. Waiting for
        // the peer to be discovered again left it unreachable for as long as it stayed advertised.
        let retriesDial = refused && connection.direction == .outbound && error?.code == .securityHandshakeFailed
        // A stranger's refusals are reported (logged and published) once per remote host, kind
        // (code) and episode: an attacker re-opening connections gets neither a log line nor an
        // event per connection, and a subscriber that reads slowly holds no event per connection
        // either.
        // Our own dials are refused at most once per discovery of the peer: each is reported.
        // A dial retried after an interrupted handshake is reported once per episode, as a
        // stranger's refusal is, not once per redial.
        let reportRefusal = refused && !evicted && error.map { error in
            (connection.direction == .outbound && !retriesDial) || configuration.security.shouldLog(error, remote: connection.remoteDescription)
        } == true
        var armSwitch: (peerID: String, generation: Int)?
        var armWindow: (peerID: String, generation: Int)?
        var suspendedAgain = false
        let redialKey = withState { state -> String? in
            let id = ObjectIdentifier(connection)
            state.connections[id] = nil
            state.pendingHandshakes.completed(ObjectIdentifier(connection.channel))
            guard state.running else { return nil }
            if reportRefusal, let error { state.emit(.error(error)) }
            guard let remote = connection.remote else {
                // Closed before its handshake completed: a failed dial, or a stranger.
                return refused && !retriesDial ? nil : connection.serviceKey
            }
            guard var record = state.peers[remote.peerID] else { return nil }
            record.inboundNext[ObjectIdentifier(connection)] = nil
            state.peers[remote.peerID] = record
            switch record.link.closed(connection, byeDuplicate: reason == .peerSaidBye(reason: Bye.duplicateConnection), charge: { newBudgetShare() }) {
            case .ignored:
                // A tie-break's loser (or a connection never used): nothing changes for the peer.
                break
            case let .switching(generation):
                // The peer kept another connection to us; it is being established.
                state.peers[remote.peerID] = record
                armSwitch = (remote.peerID, generation)
            case .disconnected:
                // Suspended (feature resume) or disconnected: PeerLoss decides, this carries it out.
                switch PeerLoss.connectionClosed(reason, direction: connection.direction, session: record.session, peerDialsUs: record.dialsUs, refused: refused) {
                case let .suspend(heardUsLate):
                    if let generation = suspend(&record, reason: error, heardUsLate: heardUsLate, state: &state) {
                        armWindow = (remote.peerID, generation)
                    } else {
                        suspendedAgain = true
                    }
                case let .disconnect(redial):
                    if let error { state.rememberFailure(error, of: remote.peerID) }
                    carryOut(record.dropSession(error ?? .connectionClosed(peer: record.peer.name)), state: &state)
                    disconnected(&record, reason: error, state: &state)
                    if redial, state.peers[remote.peerID] != nil { scheduleRedial(record.serviceKeys, state: &state) }
                }
            }
            return nil
        }
        if let (peerID, generation) = armSwitch {
            let timer = configuration.clock.schedule(on: timerLoop, in: .nanoseconds(configuration.handshakeTimeout.nanoseconds)) {
                self.switchGraceExpired(peerID: peerID, generation: generation)
            }
            let armed = state.withLockedValue { state -> Bool in
                guard var record = state.peers[peerID], record.link.isSwitching else { return false }
                record.switchTimer = (generation, timer)
                state.peers[peerID] = record
                return true
            }
            if !armed { timer.cancel() }
        }
        if let (peerID, generation) = armWindow, let sessions = configuration.sessions {
            armWindowTimer(peerID: peerID, generation: generation)
            // The timeout's own sentence says "… and was disconnected", which a suspended peer is not.
            let cause = error?.code == .peerTimedOut ? "it did not answer for \(Duration.nanoseconds(configuration.peerTimeout.nanoseconds).peerKitSeconds)"
                : error?.description ?? "its connection closed"
            logger.notice("\(connection) is unreachable (\(cause)); it stays connected for \(sessions.window.peerKitSeconds) (PeerConfiguration.sessionResumeWindow) while it is redialled, and what is sent to it waits, up to \(sessions.maximumUnacknowledgedBytes) bytes.")
            return
        }
        if suspendedAgain {
            // A connection that died before the peer resumed on it: the window set when the peer
            // was first suspended still runs.
            let cause = error?.code == .peerTimedOut ? "it did not answer for \(Duration.nanoseconds(configuration.peerTimeout.nanoseconds).peerKitSeconds)"
                : error?.description ?? "its connection closed"
            logger.notice("\(connection) is unreachable again before it resumed (\(cause)); it stays connected within its resume window while it is redialled.")
        } else if let redialKey {
            // A dial whose handshake failed: the back-off logs the episode once (and publishes its
            // error, unless it was published as a refusal above).
            dialFailed(key: redialKey, reason: error?.description ?? "the connection closed during the handshake", error: reportRefusal ? nil : error)
        } else if let error, refused, !evicted {
            let log = connection.direction == .outbound ? configuration.security.shouldLog(error, remote: connection.remoteDescription) : reportRefusal
            if log { logger.notice("\(error)") }
        } else if let error, connection.remote != nil {
            // An established connection that ended badly.
            logger.notice("\(error)")
        } else if let error, connection.direction == .inbound {
            // A stranger that failed its handshake: counted, and logged once per episode.
            handshakeFailed(connection, reason: reason, error: error)
        }
    }

    /// Counts a connection that ended other than in order as refused or dropped.
    private func count(_ reason: ConnectionStateMachine.CloseReason) {
        let metrics = configuration.metrics
        switch reason {
        case .stopped, .duplicate, .peerSaidBye:
            break
        case let .refused(error, _):
            metrics.refused(error.code == .admissionRefused ? .admission : .security)
        case let .failed(failure):
            switch failure {
            case .handshake: metrics.dropped(.handshakeFailed)
            case .malformed: metrics.dropped(.malformed)
            case .frameTooLarge: metrics.dropped(.frameTooLarge)
            case .timedOut: metrics.dropped(.timedOut)
            case .tooSlow, .overOutboundBudget: metrics.dropped(.tooSlow)
            case .limitExceeded: metrics.dropped(.limitExceeded)
            case .peerIDNotBound: metrics.refused(.security)
            }
        case .peerFailed:
            metrics.dropped(.peerError)
        case .connectionLost:
            metrics.dropped(.connectionLost)
        case .transportError:
            metrics.dropped(.transportError)
        }
    }

    /// The winner of a tie-break did not arrive within the grace period: the peer is disconnected.
    /// With a session (feature resume), the peer is suspended instead, as when its connection
    /// dies: what waited for the winner stays in the session and goes out once it is back.
    private func switchGraceExpired(peerID: String, generation: Int) {
        var armWindow: (generation: Int, name: String)?
        let waiters = withState { state -> [CheckedContinuation<Void, Never>] in
            guard state.running, var record = state.peers[peerID],
                  let waiters = record.link.graceExpired(generation: generation) else { return [] }
            record.switchTimer = nil
            let reason = Self.winnerNeverArrived(peer: record.peer.name, within: configuration.handshakeTimeout)
            switch PeerLoss.winnerNeverArrived(session: record.session) {
            case .suspend:
                armWindow = suspend(&record, reason: reason, state: &state).map { ($0, record.peer.name) }
            case let .disconnect(redial):
                disconnected(&record, reason: reason, state: &state)
                if redial, state.peers[peerID] != nil { scheduleRedial(record.serviceKeys, state: &state) }
            }
            return waiters
        }
        if let armWindow {
            armWindowTimer(peerID: peerID, generation: armWindow.generation)
            logger.notice("The connection to \"\(LogSafe.text(armWindow.name, maximumBytes: 80))\" that won the tie-break did not complete its handshake within \(Duration.nanoseconds(configuration.handshakeTimeout.nanoseconds).peerKitSeconds) (PeerConfiguration.handshakeTimeout); the peer is suspended while it is redialled.")
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Why a peer whose tie-break winner did not arrive is suspended or disconnected: the real
    /// cause, not a connection that "closed unexpectedly" (it closed on the peer's own bye).
    static func winnerNeverArrived(peer name: String, within timeout: TimeAmount) -> PeerKitError {
        .handshakeFailed(reason: "its connection that won the tie-break did not complete the handshake within \(Duration.nanoseconds(timeout.nanoseconds).peerKitSeconds) (PeerConfiguration.handshakeTimeout)",
                         peer: "\"\(LogSafe.text(name, maximumBytes: 80))\"")
    }

    /// Suspends `record`'s peer (feature resume): reported ``PeerEvent/peerSuspended(_:reason:)``,
    /// still connected for the user, and redialled every ``suspendedPeerRedialInterval``. Returns
    /// the generation of the resume window's timer to arm (``armWindowTimer(peerID:generation:)``,
    /// outside the lock). Call with the lock held; it only changes state.
    private func suspend(_ record: inout PeerRecord, reason: PeerKitError?, heardUsLate: Bool = false, state: inout State) -> Int? {
        let generation = record.suspend()
        state.emit(.peerSuspended(record.snapshot, reason: reason))
        state.peers[record.peer.id] = record
        scheduleRedial(record.serviceKeys, heardUsLate: heardUsLate, state: &state)
        return generation
    }

    /// Arms a suspended peer's resume window; call without the lock. A peer back (or gone)
    /// before the timer is stored has its timer cancelled at once.
    private func armWindowTimer(peerID: String, generation: Int) {
        guard let sessions = configuration.sessions else { return }
        let timer = configuration.clock.schedule(on: timerLoop, in: sessions.window) {
            self.windowExpired(peerID: peerID, generation: generation)
        }
        let armed = state.withLockedValue { state -> Bool in
            guard var record = state.peers[peerID], record.windowTimerArmed(timer, generation: generation) else { return false }
            state.peers[peerID] = record
            return true
        }
        if !armed { timer.cancel() }
    }

    /// Reports `record`'s peer disconnected (its state machine is idle now), and removes it
    /// unless discovery still knows it. Call with the lock held; it only changes state.
    private func disconnected(_ record: inout PeerRecord, reason: PeerKitError?, state: inout State) {
        let peerID = record.peer.id
        state.droppedInbound += record.heldInbound.map { ($0.envelope, $0.connection) }
        record.heldInbound = []
        state.emit(.peerDisconnected(record.snapshot, reason: reason))
        if record.serviceKeys.isEmpty {
            state.peers[peerID] = nil
            state.emit(.peerRemoved(record.snapshot))
        } else {
            state.peers[peerID] = record
        }
        state.emit(.availablePeersChanged(Self.available(state)))
    }

    /// A tie-break's loser finished closing: when it was the last, the messages held on the
    /// winner are handed on.
    private func retiredConnectionFinished(_ connection: PeerConnection, of peerID: String) {
        let release = state.withLockedValue { state -> Bool in
            guard var record = state.peers[peerID] else { return false }
            defer { state.peers[peerID] = record }
            return record.link.finished(connection) && !record.heldInbound.isEmpty
        }
        if release { releaseInbound(of: peerID) }
    }

    /// The last tie-break loser of `peerID` closed: hands on the messages that waited on the
    /// winner, in order; messages arriving meanwhile join them, so nothing overtakes them.
    private func releaseInbound(of peerID: String) {
        let sink = messagesBox.withLockedValue { $0 }
        while true {
            var armTimer = false
            var violations: [(PeerConnection, String)] = []
            let held = state.withLockedValue { state -> [(envelope: Envelope, connection: PeerConnection, deliver: Bool)]? in
                guard var record = state.peers[peerID] else { return nil }
                defer { state.peers[peerID] = record }
                guard !record.heldInbound.isEmpty else {
                    record.releasingInbound = false
                    return nil
                }
                record.releasingInbound = true
                defer { record.heldInbound = [] }
                return record.heldInbound.map { held in
                    guard let sequence = held.sequence else { return (held.envelope, held.connection, true) }
                    switch record.takeNumbered(sequence, of: held.envelope) {
                    case let .deliver(_, arm):
                        armTimer = armTimer || arm
                        return (held.envelope, held.connection, true)
                    case .drop:
                        return (held.envelope, held.connection, false)
                    case let .violation(reason):
                        violations.append((held.connection, reason))
                        return (held.envelope, held.connection, false)
                    }
                }
            }
            guard let held else { return }
            if armTimer { armAcknowledgementTimer(for: peerID) }
            for (connection, reason) in violations { connection.fail(reason) }
            for (envelope, connection, deliver) in held {
                if deliver, let sink, let peer = connection.peer {
                    sink.enqueue(envelope, from: peer, on: connection)
                } else {
                    connection.inboundDropped(envelope)
                }
            }
        }
    }

    // MARK: Sessions (feature resume)

    /// Sets up `record`'s session for a connection whose handshake completed: the same session
    /// when the same run of the same authenticated peer comes back, else a new one (what was
    /// pending for a restarted peer fails, and it is reported disconnected first when it was
    /// suspended). Returns whether the peer was suspended and now resumes. Its record decides
    /// (``PeerRecord/sessionArrives(incarnation:fingerprint:maximumUnacknowledgedBytes:maximumQueuedOutboundBytes:perFrameOverhead:)``);
    /// this carries it out. Call with the lock held.
    private func sessionArrives(on connection: PeerConnection, remote: Hello, record: inout PeerRecord, state: inout State) -> Bool {
        guard let sessions = configuration.sessions else { return false }
        let arrival = record.sessionArrives(incarnation: remote.resumableSession, fingerprint: connection.peer?.fingerprint,
                                            maximumUnacknowledgedBytes: sessions.maximumUnacknowledgedBytes,
                                            maximumQueuedOutboundBytes: configuration.maximumQueuedOutboundBytes,
                                            perFrameOverhead: PeerConnection.perFrameOverhead, share: newBudgetShare)
        if let ended = arrival.ended {
            carryOut(ended, state: &state)
            state.rememberFailure(ended.error, of: record.peer.id)
        }
        if let event = arrival.event { state.emit(event) }
        return arrival.resumes
    }

    /// A part of the ``OutboundBudget`` for a new session's retransmit tail, or for what a peer's
    /// switch holds for its winner. Its releases happen under the lock, so the dispatcher they may
    /// wake (the budget fell below its limit, or the part holds nothing any more) is told on the
    /// timer loop, after the lock is released.
    private func newBudgetShare() -> OutboundBudget.Share {
        let loop = timerLoop
        let messagesBox = self.messagesBox  // not `self`: see configurePipeline
        return OutboundBudget.Share(budget: outboundBudget) {
            loop.execute { messagesBox.withLockedValue { $0 }?.outboxHasRoom() }
        }
    }

    /// What recording a session frame for a peer decided.
    private enum SessionSend {
        /// The peer has no session: the frame goes as without the feature.
        case noSession
        /// The transceiver stopped, or the peer is unknown.
        case notConnected
        /// Kept until acknowledged, and written on `current` (when connected).
        case kept(current: PeerConnection?)
        /// At the bound while the peer is connected: a sender that can wait waits for acknowledgements.
        case full
        /// At the bound while the peer is connected, for a frame that cannot wait: close
        /// `close` as failed (``sessionBoundFailure()``).
        case refuse(close: PeerConnection?)
        /// The session ended (or was ended now: the peer is disconnected): throw this.
        case failed(PeerKitError)
    }

    /// Numbers `frame` in the peer's session and keeps it, charged to the ``OutboundBudget`` until
    /// the peer acknowledges it, unless it is `shared` (a broadcast's, the same buffer for every
    /// peer). Call with the lock held.
    private func recordSessionFrame(_ frame: ByteBuffer, for peerID: String, canWait: Bool, shared: Bool = false, state: inout State) -> SessionSend {
        guard state.running, let index = state.peers.index(forKey: peerID) else { return .notConnected }
        return recordSessionFrame(frame, at: index, canWait: canWait, shared: shared, state: &state)
    }

    /// ``recordSessionFrame(_:for:canWait:shared:state:)`` for the peer at `index` of
    /// `state.peers`, found by the caller. The index is still valid when this returns
    /// ``SessionSend/noSession``: nothing was changed.
    private func recordSessionFrame(_ frame: ByteBuffer, at index: Dictionary<String, PeerRecord>.Index, canWait: Bool, shared: Bool, state: inout State) -> SessionSend {
        // In place (see PeerRecord.recordInSession): no copy of the record is held meanwhile.
        guard let recorded = state.peers.values[index].recordInSession(frame, charged: !shared) else { return .noSession }
        switch recorded.outcome {
        case .kept:
            // The writes end with this frame, after any the session had not written yet.
            if let writes = recorded.writes, let current = recorded.current { append(writes, to: current, state: &state) }
            return .kept(current: recorded.current)
        case .full:
            let peerID = state.peers.keys[index]
            guard var record = state.peers[peerID], let reached = record.sessionBoundReached() else { return .notConnected }
            switch reached {
            case let .connected(current):
                return canWait ? .full : .refuse(close: current)
            case let .ended(ended):
                endSession(ended, of: &record, state: &state)
                return .failed(ended.error)
            }
        case let .ended(error):
            return .failed(error)
        }
    }

    /// Carries out the end of `record`'s session its record decided (``PeerRecord/sessionBoundReached()``)
    /// and reports the peer disconnected with its error (the peer has no connection). Call with
    /// the lock held.
    private func endSession(_ ended: PeerRecord.SessionEnd, of record: inout PeerRecord, state: inout State) {
        carryOut(ended, state: &state)
        state.rememberFailure(ended.error, of: record.peer.id)
        disconnected(&record, reason: ended.error, state: &state)
    }

    /// Hands what a session's end left to ``withState(_:)``: its waiting senders are resumed and
    /// its window timer is cancelled once the lock is released. Call with the lock held.
    private func carryOut(_ ended: PeerRecord.SessionEnd?, state: inout State) {
        guard let ended else { return }
        state.waitersToResume += ended.waiters
        if let timer = ended.windowTimer { state.timersToCancel.append(timer) }
    }

    /// The failure a peer is disconnected with when it does not acknowledge what was sent to it.
    private func sessionBoundFailure() -> ConnectionStateMachine.Failure {
        .limitExceeded("it did not acknowledge what was sent to it: \(configuration.sessions?.maximumUnacknowledgedBytes ?? 0) bytes waited for its acknowledgement, the limit (PeerConfiguration.maximumUnacknowledgedBytes)")
    }

    /// ``send(_:to:)`` for a peer with a session. Returns false when it has none.
    private func sendInSession(_ frame: ByteBuffer, to peer: Peer) async throws(PeerKitError) -> Bool {
        while true {
            switch withState({ recordSessionFrame(frame, for: peer.id, canWait: true, state: &$0) }) {
            case .noSession, .notConnected:
                return false
            case let .kept(current):
                // Paced like a socket, as without a session.
                if let current, current.queuedOutboundBytes >= PeerConnection.outboxHighWatermark {
                    do {
                        try await current.waitForRoom(grace: configuration.slowPeerGracePeriod, limit: configuration.maximumQueuedOutboundBytes)
                    } catch where error.code == .peerTooSlow {
                        throw error
                    } catch {
                        // The connection died: the frame is kept by the session, for the resume.
                    }
                }
                return true
            case .full, .refuse:
                await waitForAcknowledgements(of: peer.id)
            case let .failed(error):
                throw error
            }
        }
    }

    /// ``sendWithoutWaiting(_:to:)`` for a peer with a session. Nil when it has none.
    private func sendInSessionWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool? {
        switch withState({ recordSessionFrame(frame, for: peerID, canWait: false, state: &$0) }) {
        case .noSession, .notConnected:
            return nil
        case .kept:
            return true
        case let .refuse(close):
            close?.requestClose(.failed(sessionBoundFailure()))
            return false
        case .full, .failed:
            return false
        }
    }

    /// Waits until the peer's acknowledgements make room in its session (or the session ends).
    /// A peer that acknowledges nothing for ``Configuration/slowPeerGracePeriod`` meanwhile is
    /// disconnected (``acknowledgementsOverdue(of:since:)``).
    private func waitForAcknowledgements(of peerID: String) async {
        guard let before = state.withLockedValue({ $0.peers[peerID]?.session?.acknowledged }) else { return }
        let timer = configuration.clock.schedule(on: timerLoop, in: .nanoseconds(configuration.slowPeerGracePeriod.nanoseconds)) {
            self.acknowledgementsOverdue(of: peerID, since: before)
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = state.withLockedValue { state -> Bool in
                guard state.running, var record = state.peers[peerID], var session = record.session,
                      case .waiting = session.wait(continuation) else { return false }
                record.session = session
                state.peers[peerID] = record
                return true
            }
            if !waiting { continuation.resume() }
        }
        timer.cancel()
    }

    /// A sender waited the grace period for acknowledgements: when none came, the peer is
    /// disconnected (its connection failed, or, suspended, its session ended).
    private func acknowledgementsOverdue(of peerID: String, since before: UInt64) {
        let close = withState { state -> PeerConnection? in
            guard state.running, var record = state.peers[peerID],
                  let reached = record.acknowledgementsOverdue(since: before) else { return nil }
            switch reached {
            case let .connected(current):
                return current
            case let .ended(ended):
                endSession(ended, of: &record, state: &state)
                return nil
            }
        }
        close?.requestClose(.failed(sessionBoundFailure()))
    }

    /// Appends what `peerID`'s session has not written yet to its current connection's outbox,
    /// in order, with the lock held: the wire order is then the numbering's, whoever sends, and
    /// no writer has to be claimed. The drains are scheduled once the lock is released
    /// (``State/finishAppend(_:to:)``). A connection that ended refuses them: they stay in the
    /// session, for the resume. Call with the lock held (``withState(_:)``).
    private func writeSession(of peerID: String, state: inout State) {
        // In place (see PeerRecord.recordInSession): no copy of the record is held meanwhile.
        guard let index = state.peers.index(forKey: peerID),
              let (current, writes) = state.peers.values[index].takeSessionWrites() else { return }
        append(writes, to: current, state: &state)
    }

    /// Appends a session's `writes` to `connection`'s outbox (see ``writeSession(of:state:)``):
    /// the session charges them to the budget, the outbox does not.
    private func append(_ writes: Session.Writes, to connection: PeerConnection, state: inout State) {
        let appended = if let from = writes.from {
            connection.appendInOrder([SessionFrame.resend(from: from).encode()] + writes.frames)
        } else {
            connection.appendInOrder(writes.frames)
        }
        if appended.bytes > 0 { state.finishAppend(appended, to: connection) }
    }

    /// A `peerkit.resume`, `peerkit.resend` or `peerkit.ack` from the peer on `connection`: its
    /// record decides (``PeerRecord/sessionControl(_:on:)``); this carries it out.
    private func sessionControl(_ frame: SessionFrame, on connection: PeerConnection, from peer: Peer) {
        var violation: String?
        var resent = 0
        var restarted: PeerRecord.SessionRestart?
        withState { state in
            // In place (see PeerRecord): the record's session alone refers to the retransmit
            // tail while it changes (an acknowledgement drops its head), so that it is not copied.
            guard let index = state.peers.index(forKey: peer.id) else { return }
            let outcome = state.peers.values[index].sessionControl(frame, on: connection)
            state.waitersToResume += outcome.waiters
            if let timer = outcome.windowTimer { state.timersToCancel.append(timer) }
            if let restart = outcome.restart { state.queue(.sessionRestarted(restart.peer, reason: restart.reason)) }
            violation = outcome.violation
            restarted = outcome.restart
            if outcome.writesSession {
                resent = outcome.resending
                writeSession(of: peer.id, state: &state)
            }
        }
        if let violation { connection.fail(violation) }
        if let restarted {
            logger.warning("\(peer.description.capitalizedFirst) ended its side of the session while this side kept it (its resume window ran out first, or it reached a limit), so it starts again: \(restarted.lostFrames) messages (\(restarted.lostBytes) bytes) written to it and not acknowledged may not have arrived, and requests waiting on it failed.")
        }
        if resent > 0 { logger.debug("Resending \(resent) session frames to \(peer) that it did not acknowledge.") }
    }

    /// A numbered frame (a message, request or reply) from a peer with a session.
    private func armAcknowledgementTimer(for peerID: String) {
        _ = configuration.clock.schedule(on: timerLoop, in: Session.acknowledgementDelay) {
            self.acknowledgementTimerFired(for: peerID)
        }
    }

    /// Acknowledges what arrived since the last acknowledgement, on the peer's current connection.
    private func acknowledgementTimerFired(for peerID: String) {
        let acknowledgement = state.withLockedValue { state -> (count: UInt64, connection: PeerConnection)? in
            // In place (see PeerRecord).
            guard let index = state.peers.index(forKey: peerID) else { return nil }
            return state.peers.values[index].acknowledgementTimerFired()
        }
        if let (count, connection) = acknowledgement {
            connection.send(SessionFrame.ack(received: count).encode())
        }
    }

    /// The resume window of a suspended peer ran out: it is disconnected, and what was pending
    /// for it throws ``PeerKitError/sessionExpired(peer:window:)``. A connection that came back
    /// meanwhile but was not resumed by the peer is closed. Its record decides
    /// (``PeerRecord/windowExpired(generation:window:)``); this carries it out.
    private func windowExpired(peerID: String, generation: Int) {
        guard let sessions = configuration.sessions else { return }
        var close: PeerConnection?
        var expired: PeerKitError?
        withState { state in
            guard state.running, var record = state.peers[peerID],
                  let expiry = record.windowExpired(generation: generation, window: sessions.window) else { return }
            expired = expiry.error
            state.waitersToResume += expiry.waiters
            state.rememberFailure(expiry.error, of: peerID)
            switch expiry.then {
            case let .close(connection):
                close = connection
                state.peers[peerID] = record
            case .disconnect:
                disconnected(&record, reason: expiry.error, state: &state)
            }
        }
        if let expired { logger.notice("\(expired)") }
        close?.requestClose(.failed(.handshake("it did not resume its session within \(sessions.window.peerKitSeconds) (PeerConfiguration.sessionResumeWindow)")))
    }

    // MARK: Events

    /// Whether a connect failed because the host refused it (TCP's `ECONNREFUSED`: it answered,
    /// and nothing listens at that port), as opposed to a timeout, an unreachable network or any
    /// other failure: see ``DialPlan/everyEndpointRefused``.
    static func isRefusal(_ error: any Error) -> Bool {
        switch error {
        case let error as IOError:
            return error.errnoCode == ECONNREFUSED
        case let error as NIOConnectionError:
            // A name that resolved (no DNS error) to addresses that all refused.
            return error.dnsAError == nil && error.dnsAAAAError == nil && !error.connectionErrors.isEmpty
                && error.connectionErrors.allSatisfy { isRefusal($0.error) }
        case let error as any PeerTransportConnectError:
            return error.isConnectionRefused
        default:
            return false
        }
    }

    /// An error as a sentence fragment naming its cause: for a system call, the call and errno.
    static func describe(_ error: any Error) -> String {
        if let ioError = error as? IOError {
            // Its description names the call, the errno's text and its number, with a parenthesis
            // too many after the text ("read(…): Connection reset by peer) (errno: 104)", NIO
            // 2.x's format), which is taken out.
            return ioError.description.replacingOccurrences(of: ") (errno: ", with: " (errno: ")
        }
        if let connectError = error as? NIOConnectionError {
            let reasons = connectError.connectionErrors.map { "\($0.target): \(describe($0.error))" }
            return reasons.isEmpty ? "\(connectError)" : reasons.joined(separator: "; ")
        }
        return String(describing: error)
    }
}

extension EventLoopFuture where Value == Void {
    /// Fails with a connect timeout when this does not complete within `timeout` on `clock`: the
    /// connect timeout for channels from a ``PeerTransport``.
    fileprivate func timingOut(after timeout: Duration, clock: PeerClock, on eventLoop: any EventLoop, endpoint: PeerEndpoint) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        let done = PeerTimer.Flag()
        let timer = clock.schedule(on: eventLoop, in: timeout) {
            guard !done.isSet else { return }
            done.set()
            promise.fail(ChannelError.connectTimeout(.nanoseconds(timeout.nanosecondsClamped)))
        }
        hop(to: eventLoop).whenComplete { result in
            timer.cancel()
            guard !done.isSet else { return }
            done.set()
            promise.completeWith(result)
        }
        return promise.futureResult
    }
}
