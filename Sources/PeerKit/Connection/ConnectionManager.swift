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
///
/// This file holds the state, its lock and the lifecycle; each facet has a file of its own:
/// - `ConnectionManager+Peers.swift`: questions about peers, and the frames users send them;
/// - `ConnectionManager+Discovery.swift`: services found, changed and lost;
/// - `ConnectionManager+Dialling.swift`: dials (Happy Eyeballs) and redials with back-off;
/// - `ConnectionManager+Pipeline.swift`: accepted and dialled channels, their limits and pipeline;
/// - `ConnectionManager+ConnectionEvents.swift`: what connections report (handshakes, frames, closes);
/// - `ConnectionManager+Sessions.swift`: resumable sessions.
///
/// The facets share ``state`` and ``withState(_:)``, which Swift cannot keep private to one type
/// across files; nothing outside these files touches them.
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

    struct ServiceRecord {
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

    struct State {
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

        /// Reads `body` of the record at `index` where it lies. `peers.values[index].x` reads
        /// through the values' getter, on a copy of the whole record (a retain and a release of
        /// each of its references, its session's tail among them); `inout` reaches it through
        /// their `_modify` accessor, in place. For the reads made once per message.
        mutating func peer<T>(at index: Dictionary<String, PeerRecord>.Index, _ body: (inout PeerRecord) -> T) -> T {
            body(&peers.values[index])
        }

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
    let heartbeats: HeartbeatTicker
    let group: any EventLoopGroup
    /// What all connections together may hold unhandled (``Configuration/maximumTotalQueuedInboundBytes``).
    let inboundBudget: InboundBudget
    /// What all connections together may hold queued to send (``Configuration/maximumTotalQueuedOutboundBytes``).
    let outboundBudget: OutboundBudget
    /// Where the manager's own timers run (and a request's timeout, when its peer is switching).
    let timerLoop: any EventLoop
    let logger: Logger
    let state: NIOLockedValueBox<State>
    private let delegateBox = NIOLockedValueBox<(any ConnectionManagerDelegate)?>(nil)
    let messagesBox = NIOLockedValueBox<(any InboundMessageSink)?>(nil)
    let resourcesBox = NIOLockedValueBox<(any ResourceFrameSink)?>(nil)
    /// The families the listener accepts, and its port when it is bound to every address (so that
    /// an endpoint on a local address and this port is ourselves); set by ``start()``.
    let listened = NIOLockedValueBox<(families: AddressFamilies, wildcardPort: Int?)>((.all, nil))

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

    var localPeerID: String { configuration.localHello.peerID }

    /// Runs `body` with the state locked, then delivers the events it queued.
    @discardableResult
    func withState<T>(_ body: (inout State) throws -> T) rethrows -> T {
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

    // MARK: Errors

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
