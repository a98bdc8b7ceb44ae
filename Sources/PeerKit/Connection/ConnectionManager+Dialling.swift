import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

// Dialling the services discovery found, and redialling lost peers with back-off.
extension ConnectionManager {
    /// Dials the service `key` unless it is being dialled or its peer is connected: every
    /// endpoint, in the manner of Happy Eyeballs (``DialPlan``). Endpoints that lead back to this
    /// transceiver itself are left out.
    func dial(key: String) {
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
    func ownEndpointFilter() -> @Sendable (PeerEndpoint) -> Bool {
        guard let port = listened.withLockedValue({ $0.wildcardPort }) else { return { _ in false } }
        let addresses = LocalAddresses.current()
        return { LocalAddresses.isOwn($0, addresses: addresses, port: port) }
    }

    /// Does what the dial plan of service `key` (dial `generation`) asked.
    func perform(_ actions: [DialPlan.Action], key: String, generation: Int) {
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
    func dialFailed(key: String, reason: String, error: PeerKitError? = nil, everyEndpointRefused: Bool = false) {
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
    func scheduleRedial(_ keys: Set<String>, heardUsLate: Bool = false, state: inout State) {
        for key in keys {
            guard var record = state.services[key],
                  let redial = record.dialer.connectionLost(policy: dialPolicy, random: Double.random(in: 0..<1), arming: state.nextRetryArming(), heardUsLate: heardUsLate) else { continue }
            state.retriesToArm.append((key, redial.delay, redial.arming))
            state.services[key] = record
        }
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
