import NIOCore

// Accepted and dialled channels: the connection limits, the handshake slots and the pipeline.
extension ConnectionManager {
    /// Sets up an accepted connection, or closes it at once when a connection limit is reached.
    /// When every handshake slot is taken, the oldest pending handshake of the busiest address is
    /// closed to make room (see ``HandshakeSlots``); a connection from an address with
    /// ``Configuration/maximumPendingHandshakesPerAddress`` pending handshakes is closed at once.
    func configureInbound(_ channel: any Channel) throws {
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

    typealias Slots = HandshakeSlots<ObjectIdentifier, any Channel>

    /// Whether `connection` was closed to make room for another handshake (its TLS handler then
    /// reports a failed handshake, which is not news: the eviction was counted).
    func wasEvicted(_ connection: PeerConnection) -> Bool {
        state.withLockedValue { $0.pendingHandshakes.wasEvicted(ObjectIdentifier(connection.channel)) }
    }

    /// A stranger's connection failed its handshake: counted in the episode, whose first failure
    /// is logged whole (an evicted connection was counted when it was evicted); the summaries
    /// count failures by what went wrong, without the peer's address and port.
    func handshakeFailed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason, error: PeerKitError) {
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

    func configurePipeline(_ channel: any Channel, direction: TieBreak.Direction, serviceKey: String?) throws {
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
}
