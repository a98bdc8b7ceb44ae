import NIOCore

/// The whole life of one connection, as a value type: handshake, keepalive, limits and close.
///
///     idle ──activated──▶ handshaking ──hello──▶ open ──closeRequested / bye──▶ closing ──▶ closed
///                              │                   │                                        ▲
///                              └──── failure ──────┴──── failure (sends peerkit.error) ─────┘
///
/// The channel handler feeds it events (`activated`, `bytesArrived`, `frameReceived`,
/// `heartbeat`, `closeRequested`, `channelClosed`, ...) with the current time and the figures it
/// needs (the outbox size, whether reading is paused), and performs the ``Action`` each returns.
/// It never touches a socket, so it is tested with plain values. Every way a connection ends is a
/// ``CloseReason``, reported exactly once (``Action/reportClosed(_:)``); after that the machine
/// ignores further events.
///
/// Control payloads are decoded with PeerKit's JSON codec (``Envelope/decodePayload(_:syntaxChecked:)``),
/// as messages are. The peer's hello is not kept here: it goes up with ``Action/established(_:)``
/// and is stored once, by the ``PeerConnection``.
struct ConnectionStateMachine {
    /// Protocol parameters and limits for one connection.
    struct Configuration: Sendable {
        var localHello: Hello
        var heartbeatInterval: TimeAmount
        var peerTimeout: TimeAmount
        var handshakeTimeout: TimeAmount
        /// The frame limit once the handshake completed (before it, the pipeline's smaller one holds).
        var maximumFrameLength: Int = 16 * 1024 * 1024
        /// Bytes that may wait in the outbox…
        var maximumQueuedOutboundBytes: Int = 32 * 1024 * 1024
        /// …for at most this long before the peer is disconnected as too slow.
        var slowPeerGracePeriod: TimeAmount = .seconds(10)
        /// What all connections together may hold queued (``OutboundBudget``): while it is spent,
        /// a peer that holds ``PeerConnection/outboxHighWatermark`` or more of it for the grace
        /// period is disconnected as too slow too.
        var maximumTotalQueuedOutboundBytes: Int = 128 * 1024 * 1024
        /// Certificates mode: the peer's hello must carry the fingerprint of the certificate the
        /// TLS handshake verified (``ConnectionStateMachine/peerAuthenticated(fingerprint:)``).
        var requiresAuthenticatedPeerID = false
        /// Whether this side drives the link's heartbeat (the side that dialled): see
        /// ``ConnectionStateMachine/pingAfter``.
        var drivesHeartbeat = true

        /// How often the handler calls ``ConnectionStateMachine/heartbeat(now:queuedOutboundBytes:readingPaused:stalledFor:heldOfSpentBudget:)``:
        /// often enough that a silent peer is noticed within a tenth of the timeout of its due
        /// time, and a ping goes out within half an interval of its due time. Ticks cost no packets.
        var tickInterval: TimeAmount {
            Self.tickInterval(heartbeatInterval: heartbeatInterval, peerTimeout: peerTimeout)
        }

        static func tickInterval(heartbeatInterval: TimeAmount, peerTimeout: TimeAmount) -> TimeAmount {
            .nanoseconds(max(10_000_000, min(heartbeatInterval.nanoseconds / 2, peerTimeout.nanoseconds / 10)))
        }
    }

    /// A protocol frame the handler must send.
    enum ControlFrame: Equatable, Sendable {
        case hello(Hello)
        case ping(id: String)
        case pong(replyTo: String?)
        case bye(reason: String?)
        case error(reason: String, replyTo: String?)
        /// Our advertised name changed (a DNS-SD name collision renamed us).
        case rename(name: String)
    }

    /// Why a connection had to be failed by this side.
    enum Failure: Error, Equatable, Sendable {
        case handshake(String)
        case malformed(String)
        case frameTooLarge(length: Int, limit: Int)
        case timedOut(silence: TimeAmount)
        case tooSlow(queuedBytes: Int, limit: Int, grace: TimeAmount)
        /// The peer held `queuedBytes` of the transceiver's ``OutboundBudget`` of `budget` bytes
        /// (``PeerConnection/outboxHighWatermark`` or more) while it was spent, for longer than
        /// the grace period.
        case overOutboundBudget(queuedBytes: Int, budget: Int, grace: TimeAmount)
        /// The peer went over a limit that a layer above the connection enforces (its group
        /// membership, for example); the sentence fragment says which.
        case limitExceeded(String)
        /// Certificates mode: the hello's peer ID is not the verified certificate's fingerprint
        /// (nil: no certificate was verified).
        case peerIDNotBound(claimed: String, fingerprint: String?)
    }

    /// Why a connection ended: exactly one per connection.
    enum CloseReason: Equatable, Sendable {
        /// This side stopped (the transceiver stopped); `bye` was sent.
        case stopped
        /// This side closed it as the loser of a tie-break; `bye` was sent.
        case duplicate
        /// The peer said `bye`, with its reason.
        case peerSaidBye(reason: String?)
        /// This side failed it: a protocol violation, a timeout, a slow peer, a limit (also when
        /// asked to by the layer above, with ``ConnectionStateMachine/closeRequested(_:)``).
        case failed(Failure)
        /// The peer sent `peerkit.error` (and closes): its reason.
        case peerFailed(reason: String)
        /// The socket closed without a bye.
        case connectionLost
        /// The socket failed (reset, TLS error, ...): what the transport said.
        case transportError(String)
        /// This side refused the peer: a failed TLS handshake (a wrong key, the other security
        /// mode) or the admission hook; `notice` is sent to the peer as `peerkit.error` first.
        case refused(PeerKitError, notice: String?)
    }

    /// What the handler must do after an event.
    enum Action: Equatable {
        case none
        case send(ControlFrame)
        /// The handshake completed: raise the frame limit and tell the connection layer who the peer is.
        case established(Hello)
        /// An application message (or a reply), or a control frame of a feature the layer above
        /// handles (``EnvelopeType/passedUp``, `peerkit.resource.*`), for the messaging layer.
        case deliver(Envelope)
        /// A binary chunk of a resource (the `resources` feature) for the messaging layer.
        case deliverChunk(ResourceChunk)
        /// The peer's name changed to `name` (checked against the hello's limits).
        case renamed(name: String)
        /// Report `reason` now; then send what is queued (unless the peer is not reading or is
        /// silent) and `frame`, if any, and close the socket as `mode` says.
        case close(sending: ControlFrame?, mode: CloseMode, reason: CloseReason)
        /// Report that the connection ended (the socket is already closed or closing).
        case reportClosed(CloseReason)
        /// Close the socket now: a closing connection heard all it was waiting for (its reason
        /// was reported already).
        case finishClosing
    }

    /// How the socket closes once the last frame is written.
    enum CloseMode: Equatable, Sendable {
        /// Close fully once written.
        case close
        /// Shut the output only and read (dropping) what the peer still sends until it closes
        /// (at most a second), so the peer reads the last frame (a `peerkit.error`, or the bye
        /// of a side that stops) before a FIN rather than losing it to a reset: closing fully
        /// with bytes unread makes the kernel reset the connection, and a reset discards what
        /// was not transmitted yet.
        case halfClose
        /// Keep reading, and delivering, until the peer closes: after a tie-break `bye`, messages
        /// the peer sent on this connection before it read the bye are not lost.
        case awaitPeer
    }

    private enum State: Equatable {
        case idle
        case handshaking(since: NIODeadline)
        case open
        /// Closing: the reason is reported already; waiting for the socket to close. Messages
        /// still arriving are delivered only when `delivering` (a retired duplicate).
        case closing(delivering: Bool)
        case closed
    }

    /// The longest untrusted string accepted in a hello (a peer ID), in UTF-8 bytes.
    static let maximumPeerIDLength = 64
    /// At most this many discovery-info pairs in a hello, each at most 255 bytes (a TXT string).
    static let maximumDiscoveryInfoCount = 64
    /// At most this many feature names in a hello, each at most ``maximumFeatureNameLength``
    /// bytes: far more than there are features, and it bounds what a hello keeps per connection.
    static let maximumFeatureCount = 32
    /// The longest feature name accepted in a hello, in UTF-8 bytes.
    static let maximumFeatureNameLength = 64
    /// Why a certificate-mode peer's hello is refused; a peer that reads it does not redial.
    static let unboundPeerIDReason = "a peer ID must be the SHA-256 fingerprint of the peer's certificate public key"

    let configuration: Configuration
    private var state: State = .idle
    /// When the last byte arrived: any bytes prove the peer alive.
    private var lastHeard: NIODeadline = .uptimeNanoseconds(0)
    /// Set when this is a retired duplicate that the peer lost (``closeRequested(_:now:peerLostIt:)``):
    /// it waits for the peer's bye only while something still arrives on it.
    private var closesWhenQuiet = false
    /// When we last sent a ping, while one is unanswered.
    private var outstandingPing: (id: String, sent: NIODeadline)?
    private var pingCount = 0
    /// Since when the outbox has been over its limit.
    private var overOutboundLimitSince: NIODeadline?
    /// Since when the peer has held a megabyte or more while the transceiver's outbound budget
    /// was spent.
    private var holdingSpentBudgetSince: NIODeadline?
    /// The public-key fingerprint of the peer's certificate, once the TLS handshake verified it.
    private(set) var authenticatedFingerprint: String?
    /// The features both hellos listed, fixed when the handshake completes.
    private var negotiatedFeatures: Set<String> = []

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Whether both hellos listed `feature`, so that its frames may be sent and are accepted.
    func negotiated(_ feature: String) -> Bool {
        negotiatedFeatures.contains(feature)
    }

    /// Whether the connection is open for messages.
    var isOpen: Bool {
        if case .open = state { return true }
        return false
    }

    /// Whether the connection is closing or closed: its reason has been reported.
    var isEnding: Bool {
        switch state {
        case .closing, .closed: return true
        case .idle, .handshaking, .open: return false
        }
    }

    // MARK: Events

    /// The TCP connection is up: send our hello.
    mutating func activated(now: NIODeadline) -> Action {
        guard case .idle = state else { return .none }
        state = .handshaking(since: now)
        lastHeard = now
        return .send(.hello(configuration.localHello))
    }

    /// The TLS handshake verified the peer's certificate, whose public key has `fingerprint`:
    /// its hello must claim that as its peer ID.
    mutating func peerAuthenticated(fingerprint: String) {
        authenticatedFingerprint = fingerprint
    }

    /// Bytes arrived (a whole frame or part of one): the peer is alive.
    mutating func bytesArrived(now: NIODeadline) {
        lastHeard = now
    }

    /// A frame arrived and parsed as an envelope.
    mutating func frameReceived(_ envelope: consuming Envelope, now: NIODeadline) -> Action {
        lastHeard = now
        switch state {
        case let .closing(delivering):
            if delivering, envelope.type == EnvelopeType.bye {
                // A retired duplicate: the peer's bye is the last frame it writes here, so
                // everything it sent on this connection has arrived. Close now rather than at
                // the timeout; the reason was reported when the close began.
                state = .closing(delivering: false)
                return .finishClosing
            }
            let passed = !envelope.isControl || EnvelopeType.passedUp.contains(envelope.type)
                || (envelope.type.hasPrefix(EnvelopeType.resourcePrefix) && negotiated(Hello.Feature.resources))
            return delivering && passed ? .deliver(envelope) : .none
        case .idle, .closed:
            return .none
        case .handshaking:
            return receiveHello(envelope)
        case .open:
            // Moved into the action, not copied: this is every message's way.
            guard envelope.isControl else { return .deliver(consume envelope) }
            switch envelope.type {
            case EnvelopeType.ping:
                return .send(.pong(replyTo: envelope.id))
            case EnvelopeType.pong:
                if let outstanding = outstandingPing, envelope.replyTo == outstanding.id { outstandingPing = nil }
                return .none
            case EnvelopeType.bye:
                let bye = try? envelope.decodePayload(Bye.self)
                state = .closing(delivering: false)
                return .close(sending: nil, mode: .close, reason: .peerSaidBye(reason: bye?.reason.map { LogSafe.text($0) }))
            case EnvelopeType.error:
                if envelope.replyTo != nil { return .deliver(envelope) }
                let payload = try? envelope.decodePayload(ErrorPayload.self)
                state = .closing(delivering: false)
                let reason = payload.map { LogSafe.text($0.reason) } ?? "the peer reported an error without a reason"
                return .close(sending: nil, mode: .close, reason: .peerFailed(reason: reason))
            case EnvelopeType.rename:
                guard let rename = try? envelope.decodePayload(Rename.self) else {
                    return fail(.malformed("a peerkit.rename payload lacks its name"))
                }
                if let problem = Self.problem(withName: rename.name) {
                    return fail(.handshake("the peer's new name \(problem)"))
                }
                return .renamed(name: rename.name)
            case EnvelopeType.hello:
                return fail(.handshake("a second peerkit.hello arrived after the handshake"))
            case let type where type.hasPrefix(EnvelopeType.resourcePrefix):
                // Only when both sides take part; otherwise ignored like any unknown control frame.
                return negotiated(Hello.Feature.resources) ? .deliver(envelope) : .none
            default:
                // A feature's frame goes up to the layer that owns the feature; a control type
                // from a later protocol version is ignored.
                return EnvelopeType.passedUp.contains(envelope.type) ? .deliver(envelope) : .none
            }
        }
    }

    /// A piece of a binary chunk frame's data arrived (``FrameDecoder`` passes each read's
    /// share on): accepted only on an open connection whose hellos both listed the `resources`
    /// feature.
    mutating func chunkReceived(_ chunk: ResourceChunk, now: NIODeadline) -> Action {
        lastHeard = now
        switch state {
        case .idle, .closed:
            return .none
        case let .closing(delivering):
            guard delivering, negotiated(Hello.Feature.resources) else { return .none }
            return .deliverChunk(chunk)
        case .handshaking:
            return fail(.handshake("the first frame was a binary frame, not peerkit.hello"))
        case .open:
            guard negotiated(Hello.Feature.resources) else {
                return fail(.malformed("a binary frame arrived, and the resources feature was not negotiated"))
            }
            return .deliverChunk(chunk)
        }
    }

    /// The layer above found the peer breaking the protocol (for example, a resource chunk over
    /// the window the receiver granted): fail the connection with `reason`, a sentence fragment.
    mutating func violationReported(_ reason: String) -> Action {
        guard !isEnding else { return .none }
        return fail(.malformed(reason))
    }

    /// A frame could not be read (too large, truncated, or not an envelope).
    mutating func frameRejected(_ error: WireError) -> Action {
        switch state {
        case .closing, .closed:
            return .none
        case .idle, .handshaking, .open:
            switch error {
            case let .frameTooLarge(length, limit):
                // Before the hello, a length field that reads as text is another protocol's
                // greeting ("SSH-", "GET ", "HTTP"): that is the cause to name, not a frame size.
                if state != .open, let text = Self.text(ofLengthField: length) {
                    return fail(.handshake("it does not speak PeerKit: its first bytes were \"\(text)\" (read as a frame length, \(length) bytes, over the \(limit)-byte limit before the hello)"))
                }
                return fail(.frameTooLarge(length: length, limit: limit))
            case .truncatedFrame, .malformedEnvelope:
                return fail(.malformed(error.reason))
            }
        }
    }

    /// The four bytes of a frame's length field as text, when all are printable ASCII; nil else.
    static func text(ofLengthField length: Int) -> String? {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: length >> (24 - 8 * $0)) }
        guard length >= 0, length <= Int(UInt32.max), bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The start of the failure sent when no hello arrived within the handshake timeout: the
    /// peer that receives it knows that the connection never counted on this side.
    static let helloTimeoutReason = "no peerkit.hello arrived within"

    /// Called every heartbeat interval.
    ///
    /// - Parameters:
    ///   - queuedOutboundBytes: what waits in the outbox now; over the limit for longer than the
    ///     grace period, the peer is failed as too slow.
    ///   - readingPaused: whether this side stopped reading (its handlers are behind). The peer is
    ///     then not timed out (its bytes are simply not read yet), and is pinged every interval so
    ///     that it keeps hearing from us.
    ///   - stalledFor: how much later than due this tick came: this side's event loop was busy
    ///     (or the process was not scheduled), so the peer's bytes may be waiting unread.
    ///   - heldOfSpentBudget: while all connections together hold the transceiver's
    ///     ``OutboundBudget`` or nearly (``OutboundBudget/isNearlySpent``), what this peer holds of
    ///     it (the frames made for it alone, in its outbox and its session's retransmit tail,
    ///     ``PeerConnection/heldOfOutboundBudget``); else 0. A peer that holds
    ///     ``PeerConnection/outboxHighWatermark`` or more of it all through the grace period is
    ///     failed as too slow: peers that never read cannot keep the budget spent, and the
    ///     others held back, for good.
    mutating func heartbeat(now: NIODeadline, queuedOutboundBytes: Int = 0, readingPaused: Bool = false, stalledFor: TimeAmount = .zero, heldOfSpentBudget: Int = 0) -> Action {
        switch state {
        case .closing(delivering: true) where closesWhenQuiet:
            // A retired duplicate the peer lost: see ``closeRequested(_:now:peerLostIt:)``. Time
            // the loop did not read is not the peer's silence.
            if stalledFor > .zero {
                lastHeard = lastHeard + stalledFor
                return .none
            }
            guard now - lastHeard >= configuration.heartbeatInterval else { return .none }
            state = .closing(delivering: false)
            return .finishClosing
        case .idle, .closing, .closed:
            return .none
        case let .handshaking(since):
            if now - since >= configuration.handshakeTimeout {
                return fail(.handshake("\(Self.helloTimeoutReason) \(configuration.handshakeTimeout.seconds) s"))
            }
            return .none
        case .open:
            if stalledFor > .zero {
                // For that long nothing was read, so the peer's bytes may be waiting unread:
                // that time is not the peer's silence. Judge at the next tick.
                lastHeard = lastHeard + stalledFor
                return .none
            }
            let grace = configuration.slowPeerGracePeriod
            if Self.heldThroughGrace(queuedOutboundBytes > configuration.maximumQueuedOutboundBytes, since: &overOutboundLimitSince, now: now, grace: grace) {
                return fail(.tooSlow(queuedBytes: queuedOutboundBytes, limit: configuration.maximumQueuedOutboundBytes, grace: grace))
            }
            if Self.heldThroughGrace(heldOfSpentBudget >= PeerConnection.outboxHighWatermark, since: &holdingSpentBudgetSince, now: now, grace: grace) {
                return fail(.overOutboundBudget(queuedBytes: heldOfSpentBudget, budget: configuration.maximumTotalQueuedOutboundBytes, grace: grace))
            }
            if readingPaused {
                // Not reading, so not judging; the peer keeps hearing from us, once an interval.
                lastHeard = now
                if let sent = outstandingPing?.sent, now < sent + repingAfter { return .none }
                return .send(.ping(id: nextPingID(now: now)))
            }
            let silence = now - lastHeard
            if silence >= configuration.peerTimeout {
                return fail(.timedOut(silence: silence))
            }
            if outstandingPing == nil, now >= pingDue {
                return .send(.ping(id: nextPingID(now: now)))
            }
            return .none
        }
    }

    /// When ``heartbeat(now:queuedOutboundBytes:readingPaused:stalledFor:heldOfSpentBudget:)``
    /// next has something to decide, if nothing arrives meanwhile; nil when it never will (the
    /// connection is idle, or ending and not waiting for the peer to go quiet). The ticker skips
    /// a connection until then, so an idle link costs a tick where its ping or its timeout falls,
    /// not four ticks a second. What arrives only pushes those times later, so a tick at the time
    /// given here is never too late, and at worst finds nothing to do.
    ///
    /// What the handler passes in (the outbox, whether reading is paused) is looked at on every
    /// beat at least (``beat(atOrAfter:)``: about once a heartbeat interval), and every
    /// tick while a limit's grace period runs.
    func nextHeartbeat(now: NIODeadline) -> NIODeadline? {
        switch state {
        case .closing(delivering: true) where closesWhenQuiet:
            return lastHeard + configuration.heartbeatInterval
        case .idle, .closing, .closed:
            return nil
        case let .handshaking(since):
            return since + configuration.handshakeTimeout
        case .open:
            if overOutboundLimitSince != nil || holdingSpentBudgetSince != nil { return now }
            // Looked at again on the next beat at the latest, about an interval
            // away, whatever else is due: a look that ran late in a busy moment then does not
            // move the next one off the beat.
            let nextBeat = beat(atOrAfter: now + halfTick)
            let due = min(lastHeard + configuration.peerTimeout, nextBeat)
            if let sent = outstandingPing?.sent {
                // Pinged again after an interval while this side does not read (``heartbeat``).
                return min(due, sent + repingAfter)
            }
            return min(due, pingDue)
        }
    }

    /// When this side pings, if nothing arrives before. Pings fall on *beats*, whole multiples of
    /// the heartbeat interval on the clock every process of a machine shares (NIO's uptime), so
    /// that every idle link of a machine pings at the same instant, and the ticks between beats
    /// find nothing due and are skipped (``nextHeartbeat(now:)``); pings that fell where each
    /// link's traffic last stopped would keep every loop awake at every tick.
    ///
    /// - The side that drives the heartbeat pings at the first beat after half a tick of silence,
    ///   or after ``pingAfter`` of silence if that comes first (a heartbeat interval that is not
    ///   a whole number of ticks): every idle link's exchange falls on the same beat from its
    ///   second ping on.
    /// - The other side pings at the first beat after ``pingAfter`` of silence (only when the
    ///   driver's ping at a beat did not come), or a tick before its timeout if that comes first.
    private var pingDue: NIODeadline {
        let afterSilence = lastHeard + pingAfter
        guard configuration.drivesHeartbeat else {
            let beforeTimeout = lastHeard + configuration.peerTimeout - configuration.tickInterval
            return min(beat(atOrAfter: afterSilence), max(afterSilence, beforeTimeout))
        }
        let beat = beat(atOrAfter: lastHeard + halfTick)
        return min(afterSilence, beat)
    }

    /// The first beat (a whole multiple of the heartbeat interval) at or after `time`.
    private func beat(atOrAfter time: NIODeadline) -> NIODeadline {
        time.roundedUp(toMultipleOf: configuration.heartbeatInterval)
    }

    /// Half a heartbeat tick: the margin that puts a time measured from a look's `now` (a little
    /// after its grid tick) on the grid tick it means.
    private var halfTick: TimeAmount { .nanoseconds(configuration.tickInterval.nanoseconds / 2) }

    /// The silence after which an open connection is pinged: half a tick less than the heartbeat
    /// interval on the side that drives the heartbeat, half a tick more on the other (when that
    /// stays below the timeout). Both ends tick together (the real clock's ticks fall on a grid
    /// every process shares, see ``HeartbeatTicker``) and each counts its silence from the last
    /// exchange, so with one threshold both would be due at the same tick, and an idle link would
    /// carry two pings and two pongs where one of each proves both ends alive. So the driver
    /// pings at the tick that ends its interval (or the beat before it, ``pingDue``), and the
    /// other end pings only at the beat after its longer silence, when the driver's ping is a
    /// beat overdue (the driver is busy, frozen, or gone). Timeouts are the same on both ends.
    private var pingAfter: TimeAmount {
        let interval = configuration.heartbeatInterval.nanoseconds
        let half = halfTick.nanoseconds
        if configuration.drivesHeartbeat { return .nanoseconds(interval - half) }
        return .nanoseconds(interval + half < configuration.peerTimeout.nanoseconds ? interval + half : interval)
    }

    /// How long after its last ping a side that does not read pings again: a heartbeat interval,
    /// less half a tick. A ping is sent a little after the grid tick that was due (the event
    /// loop's `now`), so a whole interval after it would fall a little after the grid tick an
    /// interval later, and wait for the tick after that.
    private var repingAfter: TimeAmount {
        configuration.heartbeatInterval - halfTick
    }

    /// Whether `condition` has held, tick after tick, for `grace` as of `now`; `since` keeps when
    /// it started to, and is cleared when it does not hold.
    private static func heldThroughGrace(_ condition: Bool, since: inout NIODeadline?, now: NIODeadline, grace: TimeAmount) -> Bool {
        guard condition else {
            since = nil
            return false
        }
        let start = since ?? now
        since = start
        return now - start >= grace
    }

    /// Whether the connection is open and nothing has arrived on it for a heartbeat interval,
    /// although the peer answers a ping well within one when the link works (see ``TieBreak``).
    func isQuiet(now: NIODeadline) -> Bool {
        guard case .open = state else { return false }
        return now - lastHeard >= configuration.heartbeatInterval
    }

    /// This side closes the connection (`.stopped` or `.duplicate`): say bye when the handshake
    /// completed. A stopping side then half-closes (``CloseMode/halfClose``), so that the bye
    /// reaches a peer that was still sending instead of being lost to a reset; the peer, reading
    /// the bye, closes. A refusal (`.refused`) sends its notice instead and half-closes, so that
    /// the peer can read why; so does `.failed`, which the layer above uses for a peer it found in
    /// breach of a feature's rules or limits.
    ///
    /// A duplicate (the tie-break's loser) waits for what the peer still sends on it and for the
    /// peer's own bye (`.awaitPeer`), so that nothing in flight is lost, unless it is quiet at
    /// `now` (``isQuiet(now:)``): a connection the peer lost, over a link that is gone, brings
    /// nothing more, and waiting for it would only hold up the peer's frames on the winner.
    ///
    /// `peerLostIt`: the peer dialled the connection that replaced this one because it lost this
    /// one (``TieBreak/presumedLost(quiet:establishedAt:now:heartbeatInterval:)``), yet this end
    /// still hears it (a link that fails one way: the peer's old address can still send). The
    /// peer closed its end before it dialled, and that close, like its bye, may never arrive;
    /// what it wrote before has arrived once nothing has for a heartbeat interval. So the wait
    /// ends then (``heartbeat(now:queuedOutboundBytes:readingPaused:stalledFor:heldOfSpentBudget:)``
    /// finishes the close), not at the close's timeout. A loser of two connections dialled at
    /// once waits for the bye: its peer is alive and says it.
    mutating func closeRequested(_ reason: CloseReason, now: NIODeadline? = nil, peerLostIt: Bool = false) -> Action {
        guard !isEnding else { return .none }
        if case let .refused(_, notice) = reason {
            state = .closing(delivering: false)
            let frame = notice.map { ControlFrame.error(reason: $0, replyTo: nil) }
            return .close(sending: frame, mode: frame == nil ? .close : .halfClose, reason: reason)
        }
        if case let .failed(failure) = reason {
            // The layer above found the peer in breach of the protocol or of one of its limits.
            return fail(failure)
        }
        if case .open = state {
            let duplicate = reason == .duplicate
            let awaitPeer = duplicate && !(now.map { isQuiet(now: $0) } ?? false)
            closesWhenQuiet = awaitPeer && peerLostIt
            state = .closing(delivering: duplicate)
            let mode: CloseMode = duplicate ? (awaitPeer ? .awaitPeer : .close) : .halfClose
            return .close(sending: .bye(reason: duplicate ? Bye.duplicateConnection : nil), mode: mode, reason: reason)
        }
        state = .closing(delivering: false)
        return .close(sending: nil, mode: .close, reason: reason)
    }

    /// The socket closed (`error`: why, when the transport failed). Reports the reason unless
    /// one was reported already.
    mutating func channelClosed(error: String? = nil) -> Action {
        switch state {
        case .closed:
            return .none
        case .closing:
            state = .closed
            return .none
        case .idle, .handshaking, .open:
            state = .closed
            return .reportClosed(error.map { .transportError($0) } ?? .connectionLost)
        }
    }

    /// The transport failed while the connection is still up (a reset, a TLS alert): close.
    mutating func transportFailed(_ description: String) -> Action {
        switch state {
        case .closing, .closed:
            return .none
        case .idle, .handshaking, .open:
            state = .closing(delivering: false)
            return .close(sending: nil, mode: .close, reason: .transportError(description))
        }
    }

    // MARK: Handshake

    private mutating func receiveHello(_ envelope: Envelope) -> Action {
        guard envelope.type == EnvelopeType.hello else {
            if envelope.type == EnvelopeType.error {
                let payload = try? envelope.decodePayload(ErrorPayload.self)
                state = .closing(delivering: false)
                let reason = payload.map { LogSafe.text($0.reason) } ?? "no reason given"
                return .close(sending: nil, mode: .close, reason: .failed(.handshake("the peer refused the connection: \(reason)")))
            }
            return fail(.handshake("the first frame was a \"\(LogSafe.text(envelope.type, maximumBytes: 64))\" message, not peerkit.hello"))
        }
        let hello: Hello
        do {
            hello = try envelope.decodePayload(Hello.self)
        } catch {
            return fail(.handshake("the peerkit.hello payload lacks protocol, peerID, name or serviceType"))
        }
        let local = configuration.localHello
        guard hello.protocol == Hello.currentProtocol else {
            return fail(.handshake("the peer speaks protocol \(hello.protocol), and this peer speaks only protocol \(Hello.currentProtocol)"))
        }
        guard hello.serviceType == local.serviceType else {
            return fail(.handshake("the peer's service type is \"\(LogSafe.text(hello.serviceType, maximumBytes: 64))\", not \"\(local.serviceType)\""))
        }
        guard !hello.peerID.isEmpty else {
            return fail(.handshake("the peer's peerID is empty"))
        }
        guard hello.peerID.utf8.count <= Self.maximumPeerIDLength else {
            return fail(.handshake("the peer's peerID is \(hello.peerID.utf8.count) bytes long, over the limit of \(Self.maximumPeerIDLength)"))
        }
        if let problem = Self.problem(withName: hello.name) {
            return fail(.handshake("the peer's name \(problem)"))
        }
        if let info = hello.discoveryInfo {
            guard info.count <= Self.maximumDiscoveryInfoCount else {
                return fail(.handshake("the peer's discoveryInfo has \(info.count) entries, over the limit of \(Self.maximumDiscoveryInfoCount)"))
            }
            for (key, value) in info where key.utf8.count + 1 + value.utf8.count > 255 {
                return fail(.handshake("the peer's discoveryInfo entry \"\(LogSafe.text(key, maximumBytes: 64))\" is longer than the 255 bytes of a TXT string"))
            }
        }
        if let features = hello.features {
            guard features.count <= Self.maximumFeatureCount else {
                return fail(.handshake("the peer's hello lists \(features.count) features, over the limit of \(Self.maximumFeatureCount)"))
            }
            for feature in features where feature.utf8.count > Self.maximumFeatureNameLength {
                return fail(.handshake("the peer's hello lists a feature name of \(feature.utf8.count) bytes, over the limit of \(Self.maximumFeatureNameLength)"))
            }
        }
        guard hello.peerID != local.peerID else {
            return fail(.handshake("the connection leads back to this peer itself"))
        }
        if configuration.requiresAuthenticatedPeerID || authenticatedFingerprint != nil {
            guard let fingerprint = authenticatedFingerprint, hello.peerID == fingerprint else {
                return fail(.peerIDNotBound(claimed: hello.peerID, fingerprint: authenticatedFingerprint))
            }
        }
        negotiatedFeatures = Set(hello.features ?? []).intersection(local.features ?? [])
        state = .open
        return .established(hello)
    }

    /// What is wrong with a peer's name, as the end of a sentence, or nil when it is acceptable.
    static func problem(withName name: String) -> String? {
        if name.isEmpty { return "is empty" }
        let length = name.utf8.count
        if length > PeerConfiguration.maximumPeerNameLength {
            return "is \(length) bytes long, over the \(PeerConfiguration.maximumPeerNameLength) bytes of a DNS-SD instance name"
        }
        return nil
    }

    private mutating func nextPingID(now: NIODeadline) -> String {
        pingCount += 1
        let id = "ping-\(pingCount)"
        outstandingPing = (id, now)
        return id
    }

    /// Fails the connection: a `peerkit.error` saying why goes out (unless the peer is silent or
    /// not reading, when nothing would reach it), then the output is shut so the peer can read it.
    private mutating func fail(_ failure: Failure) -> Action {
        state = .closing(delivering: false)
        switch failure {
        case .timedOut, .tooSlow, .overOutboundBudget:
            return .close(sending: nil, mode: .close, reason: .failed(failure))
        case .handshake, .malformed, .frameTooLarge, .limitExceeded, .peerIDNotBound:
            let sentence = "Closing the connection: " + failure.reason + "."
            return .close(sending: .error(reason: sentence, replyTo: nil), mode: .halfClose, reason: .failed(failure))
        }
    }
}

extension ConnectionStateMachine.Failure {
    /// The reason as a sentence fragment, sent to the peer in `peerkit.error`.
    var reason: String {
        switch self {
        case let .handshake(reason), let .malformed(reason), let .limitExceeded(reason):
            return reason
        case let .frameTooLarge(length, limit):
            return "a frame of \(length) bytes exceeds the \(limit)-byte limit"
        case let .timedOut(silence):
            return "nothing arrived for \(silence.seconds) s"
        case let .tooSlow(queued, limit, grace):
            if grace == .zero { return "\(queued) bytes waited to be sent, at the \(limit)-byte limit, when a broadcast, which cannot wait, came" }
            return "\(queued) bytes waited to be sent, over the \(limit)-byte limit, for more than \(grace.seconds) s"
        case let .overOutboundBudget(queued, budget, grace):
            return "\(queued) bytes waited to be sent while all peers' send queues together were at the \(budget)-byte budget, for more than \(grace.seconds) s"
        case let .peerIDNotBound(claimed, fingerprint):
            let key = fingerprint.map { "this certificate's is \($0)" } ?? "no certificate was verified"
            return "the peer ID \"\(LogSafe.text(claimed, maximumBytes: 64))\" is refused: \(ConnectionStateMachine.unboundPeerIDReason), and \(key)"
        }
    }
}

extension ConnectionStateMachine.CloseReason {
    /// The reason as the public error, naming the peer; nil for an orderly close.
    func error(peer: String) -> PeerKitError? {
        switch self {
        case .stopped, .duplicate, .peerSaidBye:
            return nil
        case let .failed(failure):
            switch failure {
            case let .handshake(reason): return .handshakeFailed(reason: reason, peer: peer)
            case let .peerIDNotBound(claimed, fingerprint):
                return .peerIDNotBound(peer: peer, claimed: claimed, fingerprint: fingerprint ?? "none: no certificate was verified")
            case let .malformed(reason): return .malformedFrame(reason: reason, peer: peer)
            case let .frameTooLarge(length, limit): return .frameTooLarge(length: length, limit: limit, peer: peer)
            case let .timedOut(silence): return .peerTimedOut(peer: peer, silence: .nanoseconds(silence.nanoseconds))
            case let .tooSlow(queued, limit, grace):
                return .peerTooSlow(peer: peer, queuedBytes: queued, limit: limit, grace: .nanoseconds(grace.nanoseconds))
            case let .overOutboundBudget(queued, budget, grace):
                return .peerTooSlow(peer: peer, queuedBytes: queued, budget: budget, grace: .nanoseconds(grace.nanoseconds))
            case let .limitExceeded(reason):
                return .peerExceededLimit(peer: peer, reason: reason)
            }
        case let .peerFailed(reason):
            return .remoteError(reason: reason, peer: peer)
        case .connectionLost:
            return .connectionClosed(peer: peer)
        case let .transportError(description):
            return .connectionFailed(peer: peer, reason: description)
        case let .refused(error, _):
            return error
        }
    }
}

extension TimeAmount {
    /// The amount in seconds, for messages.
    var seconds: Double { Double(nanoseconds) / 1e9 }
}
