import NIOCore

/// Drives a ``ConnectionStateMachine`` for one channel: feeds it frames, read bursts and
/// heartbeat ticks, performs the actions it returns, and reports to the ``PeerConnectionDelegate``.
///
/// It keeps no connection state of its own beyond I/O bookkeeping (the heartbeat timer and a
/// read held back while reading is paused); when and why the connection ends is the state
/// machine's. Time comes from the transceiver's ``PeerClock``: with the real clock, from the
/// channel's event loop (`eventLoop.now`), so tests on an `EmbeddedEventLoop` drive heartbeats and
/// timeouts by advancing its time; with a test clock, from that clock.
///
/// Outbound, it passes writes through and takes two requests as user outbound events
/// (``PeerConnection/Request``): close, and resume reading. It withholds `read` while the
/// connection's inbound backlog is over its limit, which is how a fast sender is slowed down.
final class PeerConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = InboundFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Roughly what a queued message costs beyond its payload bytes (the envelope, its strings,
    /// the queue entry), so that a flood of empty messages is bounded too.
    static let perMessageOverhead = 256

    private var stateMachine: ConnectionStateMachine
    private let delegate: any PeerConnectionDelegate
    private let makeConnection: (any Channel) -> PeerConnection
    private let frameLimit: FrameLengthLimit
    private var connection: PeerConnection?
    /// The shared per-loop timer, when the connection manager provides one; else a timer of its own.
    private let ticker: HeartbeatTicker?
    private let clock: PeerClock
    private var heartbeatTask: PeerTimer?
    private var heartbeatRegistration: HeartbeatTicker.Registration?
    /// When the heartbeat last ticked (without a ticker), to notice a tick delayed by a busy event loop.
    private var lastTick: NIODeadline?
    /// What the connection was last told of its silence (``PeerConnection/setQuiet(_:)``): it is
    /// told again only when that changes, not at every tick.
    private var reportedQuiet = false
    /// A `read` that arrived while reading was paused, to be passed on when it resumes.
    private var readHeldBack = false
    /// Messages of the current read burst, handed to the delegate together when the burst ends
    /// (``flushDeliveries()``): one hand-off per read instead of one per message. Anything else
    /// the connection reports goes after them, so the order is the wire's.
    private var deliveries: [Envelope] = []
    /// What ``deliveries`` count against the inbound limits, and how many of them count: taken
    /// in with one lock when they are handed on, not one per message.
    private var deliveriesCost = 0
    private var deliveriesCounted = 0
    /// The time read once for the current read burst: every frame of a burst arrived at once,
    /// as far as the heartbeat's seconds can tell (``burstNow(_:)``).
    private var burstTime: NIODeadline?
    /// The storage of the last ping or pong sent, for the next one (``heartbeatFrame(_:allocator:)``).
    private var heartbeatBuffer: ByteBuffer?
    private let metrics: PeerMetrics
    /// Which `peerkit_connections` gauge counts this connection now, if any.
    private var countedAs: PeerMetrics.ConnectionState?

    /// - Parameters:
    ///   - frameLimit: shared with the pipeline's frame decoder; raised to the configuration's
    ///     `maximumFrameLength` when the handshake completes.
    ///   - ticker: ticks this connection's heartbeat together with the others on its event loop;
    ///     nil gives the connection a timer of its own (as tests on an `EmbeddedEventLoop` use).
    ///   - clock: where time comes from; the ticker's clock when there is a ticker.
    init(configuration: ConnectionStateMachine.Configuration, frameLimit: FrameLengthLimit, ticker: HeartbeatTicker? = nil, metrics: PeerMetrics = .disabled, clock: PeerClock = .continuous, delegate: any PeerConnectionDelegate, makeConnection: @escaping (any Channel) -> PeerConnection) {
        self.stateMachine = ConnectionStateMachine(configuration: configuration)
        self.ticker = ticker
        self.metrics = metrics
        self.clock = ticker?.clock ?? clock
        self.frameLimit = frameLimit
        self.delegate = delegate
        self.makeConnection = makeConnection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { activate(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        activate(context: context)
        context.fireChannelActive()
    }

    private func activate(context: ChannelHandlerContext) {
        guard connection == nil else { return }
        let connection = makeConnection(context.channel)
        self.connection = connection
        count(as: .handshaking)
        perform(stateMachine.activated(now: clock.now(on: context.eventLoop)), context: context)
        let loopBoundSelf = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        if let ticker {
            heartbeatRegistration = ticker.register(on: context.eventLoop) { now, lateBy in
                loopBoundSelf.value.heartbeat(now: now, lateBy: lateBy, context: loopBoundContext.value)
            }
        } else {
            let interval = stateMachine.configuration.tickInterval
            let eventLoop = context.eventLoop
            heartbeatTask = clock.repeating(on: eventLoop, every: .nanoseconds(interval.nanoseconds)) { now in
                eventLoop.preconditionInEventLoop()
                let handler = loopBoundSelf.value
                let lateBy = handler.lastTick.map { now - $0 - interval } ?? .zero
                handler.lastTick = now
                _ = handler.heartbeat(now: now, lateBy: lateBy, context: loopBoundContext.value)
            }
        }
    }

    /// One heartbeat tick; returns when the next is due (see ``HeartbeatTicker``).
    private func heartbeat(now: NIODeadline, lateBy late: TimeAmount, context: ChannelHandlerContext) -> NIODeadline? {
        guard let connection else { return nil }
        // A tick more than one tick interval late means the event loop was busy: see `stalledFor`.
        let interval = stateMachine.configuration.tickInterval
        let figures = connection.heartbeatFigures
        let action = stateMachine.heartbeat(
            now: now,
            queuedOutboundBytes: figures.queuedOutboundBytes,
            readingPaused: figures.readingPaused,
            stalledFor: late > interval ? late : .zero,
            heldOfSpentBudget: connection.outboundBudget?.isNearlySpent == true ? connection.heldOfOutboundBudget : 0
        )
        let quiet = stateMachine.isQuiet(now: now)
        if quiet != reportedQuiet {
            reportedQuiet = quiet
            connection.setQuiet(quiet)
        }
        perform(action, context: context)
        return stateMachine.nextHeartbeat(now: now)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let action: ConnectionStateMachine.Action
        switch unwrapInboundIn(data) {
        case let .chunk(chunk, framingBytes):
            metrics.wireBytesReceived.increment(by: chunk.data.readableBytes + framingBytes)
            action = stateMachine.chunkReceived(chunk, now: burstNow(context))
        case let .frame(frame):
            // The frame decoder strips the 4-byte length prefix.
            metrics.wireBytesReceived.increment(by: frame.readableBytes + 4)
            action = received(frame, context: context)
        case let .frames(frames):
            metrics.wireBytesReceived.increment(by: frames.reduce(0) { $0 + $1.readableBytes + 4 })
            for frame in frames { perform(received(frame, context: context), context: context) }
            return
        }
        perform(action, context: context)
    }

    /// A ping or a pong, written into the storage of the one before it. That one went out long
    /// before this beat, so nothing else holds its storage and `clear()` keeps it: an idle link's
    /// frames cost no allocation each. Should a write still hold it (a pong queued behind a
    /// slow peer's backlog), `clear()` gives this buffer storage of its own instead: a value,
    /// never changed under its holder.
    private func heartbeatFrame(_ frame: ConnectionStateMachine.ControlFrame, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = heartbeatBuffer.take() ?? allocator.buffer(capacity: 64)
        buffer.clear()
        frame.encode(into: &buffer)
        heartbeatBuffer = buffer
        return buffer
    }

    /// What the state machine makes of one whole frame body.
    private func received(_ frame: ByteBuffer, context: ChannelHandlerContext) -> ConnectionStateMachine.Action {
        do {
            // The decoder passes a chunk frame up whole only when it is too short for its header.
            if ResourceChunkFrame.isChunk(frame) { _ = try ResourceChunkFrame.decode(frame) }
            // Handed over, not kept: the state machine takes the envelope (`consuming`) and
            // moves a message into `.deliver` without a copy.
            return stateMachine.frameReceived(try EnvelopeParser.parse(frame), now: burstNow(context))
        } catch {
            return stateMachine.frameRejected(error)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushDeliveries()
        // The frame decoder passes this on after every read from the socket, whole frame or
        // not: any bytes prove the peer alive, even in the middle of a large frame.
        stateMachine.bytesArrived(now: burstNow(context))
        burstTime = nil
        context.fireChannelReadComplete()
    }

    /// The time of the current read burst, read from the clock at its first frame.
    private func burstNow(_ context: ChannelHandlerContext) -> NIODeadline {
        if let burstTime { return burstTime }
        let now = clock.now(on: context.eventLoop)
        burstTime = now
        return now
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let authenticated = event as? PeerAuthenticated {
            // From the TLS handlers in certificates mode, before any frame can arrive.
            stateMachine.peerAuthenticated(fingerprint: authenticated.fingerprint)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let refusal = error as? PeerKitError, refusal.isSecurityRefusal {
            // From the security handlers (Wire/TLS): the peer is refused before any frame was read.
            perform(stateMachine.closeRequested(.refused(refusal, notice: nil)), context: context)
        } else if let wireError = error as? WireError {
            perform(stateMachine.frameRejected(wireError), context: context)
        } else {
            perform(stateMachine.transportFailed(ConnectionManager.describe(error)), context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection?.writabilityChanged(isWritable: context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The frame decoder passes up what the last read completed before this, with no read
        // complete after it.
        flushDeliveries()
        burstTime = nil
        heartbeatTask?.cancel()
        heartbeatTask = nil
        heartbeatRegistration?.cancel()
        heartbeatRegistration = nil
        perform(stateMachine.channelClosed(), context: context)
        count(as: nil)
        context.fireChannelInactive()
    }

    // MARK: Outbound

    func read(context: ChannelHandlerContext) {
        if connection?.isReadingPaused == true {
            readHeldBack = true
        } else {
            context.read()
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let request = event as? PeerConnection.Request else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch request {
        case let .close(reason):
            perform(stateMachine.closeRequested(reason, now: clock.now(on: context.eventLoop)), context: context)
        case let .retire(peerLostIt):
            let now = clock.now(on: context.eventLoop)
            perform(stateMachine.closeRequested(.duplicate, now: now, peerLostIt: peerLostIt), context: context)
            // Looked at again when its silence would end the wait (nil: it waits for the bye).
            heartbeatRegistration?.due(stateMachine.nextHeartbeat(now: now))
        case let .fail(reason):
            perform(stateMachine.violationReported(reason), context: context)
        case .resumeReading:
            if readHeldBack, connection?.isReadingPaused == false {
                readHeldBack = false
                context.read()
            }
        }
        promise?.succeed()
    }

    // MARK: Actions

    private func perform(_ action: ConnectionStateMachine.Action, context: ChannelHandlerContext) {
        guard let connection else { return }
        switch action {
        case .none, .deliver: break
        default: flushDeliveries()  // what happened before this action reaches the delegate first
        }
        switch action {
        case .none:
            break
        case let .send(frame):
            let encoded = frame.isHeartbeat
                ? heartbeatFrame(frame, allocator: context.channel.allocator)
                : frame.encode(allocator: context.channel.allocator)
            if case .pong = frame {
                // Only the latest answer waits, and only for a writable channel: the peer's pings
                // are its own to send, as many as it likes.
                connection.sendPong(encoded)
            } else {
                connection.send(encoded, urgent: frame.isHeartbeat)
            }
        case let .established(hello):
            frameLimit.raise(to: stateMachine.configuration.maximumFrameLength)
            count(as: .open)
            connection.setRemote(hello, fingerprint: stateMachine.authenticatedFingerprint)
            // The ticker was told the handshake's deadline; an open connection is due sooner.
            heartbeatRegistration?.due(stateMachine.nextHeartbeat(now: clock.now(on: context.eventLoop)))
            delegate.connectionEstablished(connection, remote: hello)
        case let .renamed(name):
            if let hello = connection.rename(to: name) {
                delegate.connectionRenamed(connection, remote: hello)
            }
        case let .deliverChunk(chunk):
            // Not counted against the inbound limit: the transfer's window bounds it.
            delegate.connection(connection, received: chunk)
        case let .deliver(envelope):
            if Self.countsAgainstInboundLimit(envelope) {
                // Counted until its handler ran (from the hand-off on); over the limit, reads
                // are held back.
                deliveriesCost += Self.cost(of: envelope)
                deliveriesCounted += 1
            }
            deliveries.append(envelope)
        case let .close(frame, mode, reason):
            // A silent or non-reading peer would never take what is queued for it.
            let discard: Bool
            switch reason {
            case .failed(.timedOut), .failed(.tooSlow), .failed(.overOutboundBudget): discard = true
            default: discard = false
            }
            let timeout: TimeAmount = mode == .awaitPeer ? stateMachine.configuration.handshakeTimeout : .seconds(1)
            // The layer above hears first, so that it routes the peer's frames elsewhere before
            // this connection refuses them: a frame is either written here or routed again,
            // never dropped in between.
            delegate.connectionClosed(connection, reason: reason)
            connection.finish(
                lastFrame: frame.map { $0.encode(allocator: context.channel.allocator) },
                mode: mode,
                discardQueue: discard,
                timeout: timeout
            )
            if connection.channel.isActive { count(as: .closing) }
            connection.ended(error: reason.error(peer: connection.description))
        case .finishClosing:
            context.close(promise: nil)
        case let .reportClosed(reason):
            delegate.connectionClosed(connection, reason: reason)
            connection.ended(error: reason.error(peer: connection.description))
        }
    }

    /// Hands the messages of the read burst so far to the delegate, in order.
    private func flushDeliveries() {
        guard let connection, !deliveries.isEmpty else { return }
        // Out of the property first: the delegate may close this connection, and the close
        // flushes again (with nothing left).
        var burst: [Envelope] = []
        swap(&burst, &deliveries)
        // Counted before the hand-off: a handler may finish, and give its cost back, at once.
        // Reading pauses, if it must, before the next read from the socket, as it would have
        // one message at a time: the burst is already read.
        if deliveriesCounted > 0 {
            _ = connection.inboundAccepted(deliveriesCost, messages: deliveriesCounted)
            deliveriesCost = 0
            deliveriesCounted = 0
        }
        delegate.connection(connection, received: burst)
        // Unique again once the delegate returned: the next burst reuses the storage.
        burst.removeAll(keepingCapacity: true)
        if deliveries.isEmpty { deliveries = burst }
    }

    /// Moves this connection from the gauge it counts in to the one of `state` (none for nil).
    private func count(as state: PeerMetrics.ConnectionState?) {
        guard state != countedAs else { return }
        if let countedAs { metrics.connections(countedAs).decrement() }
        if let state { metrics.connections(state).increment() }
        countedAs = state
    }

    /// Whether a message counts against the inbound limits until its handler ran: messages for
    /// handlers do; replies (resolved at once) and the protocol's own frames do not.
    static func countsAgainstInboundLimit(_ envelope: Envelope) -> Bool {
        envelope.replyTo == nil && !envelope.isControl
    }

    /// What a message counts against the inbound limit.
    static func cost(of envelope: Envelope) -> Int {
        envelope.payload.readableBytes + envelope.type.utf8.count + perMessageOverhead
    }
}
