import NIOCore

/// Everything the ``ConnectionManager`` knows about one peer: its state machine above its
/// connections (``link``), the discovery keys that lead to it, its timers, the messages held
/// while a tie-break's loser closes, and its resumable session (feature `resume`) with what the
/// session decides about the peer's control frames and numbered frames.
///
/// A value type with no I/O and no clock: the manager keeps one per peer, changes it under its
/// lock through the event-named methods below, and carries out what each returns (resuming
/// waiters, cancelling timers, reporting events, failing or closing a connection, writing the
/// session's frames) after releasing the lock, or by appending it to the lists it handles then.
/// `Connection` is the connection's identity (``PeerConnection`` in the manager, a plain object
/// in tests; compared with `===`), `Timer` a timer to cancel (``PeerTimer``), and `Waiter` what a
/// sender leaves to be resumed (a continuation in the manager).
///
/// The session's methods are meant to be called on the record in its dictionary, in place
/// (`state.peers.values[index].recordInSession(frame)`): a record copied out and stored back
/// would share the session's retransmit tail with the dictionary's, so that each frame recorded
/// would copy the whole tail, and ``inboundNext`` each frame received.
struct PeerRecord<Connection: AnyObject, Timer, Waiter> {
    /// The peer's resumable session: a sender waiting for acknowledgements leaves a `Waiter`.
    typealias Session = PeerSession<Waiter>
    /// The peer's state machine above its connections: a sender waiting for a switch to end
    /// leaves a `Waiter`.
    typealias Link = PeerStateMachine<Connection, Waiter>

    /// The peer as it last introduced itself (its hello, or discovery before that).
    var peer: Peer
    /// Which connection is the peer's, the tie-break, and what waits while it switches to the
    /// winner: the peer's life above its connections.
    var link = Link()
    /// Discovery keys that lead to this peer; while there are any, a lost connection is redialled.
    var serviceKeys: Set<String> = []
    /// The grace timer of the switch in progress, by the switch's generation.
    var switchTimer: (generation: Int, timer: Timer)?
    /// Messages without a session number that arrived on the winner of a tie-break while the
    /// peer may still be writing on the loser, and any that came after them: handled once the
    /// loser closed, after what came on it (``PeerStateMachine/holdsInbound(from:)``). Session
    /// frames alone are not held: their numbers order them (``receiveNumbered(_:on:)``). Bounded
    /// by the winner's inbound limit, which stops reading from it.
    var heldInbound: [(envelope: Envelope, connection: Connection, sequence: UInt64?)] = []
    /// Set while a thread hands ``heldInbound`` on; messages arriving meanwhile join it.
    var releasingInbound = false
    /// The resumable session with the peer (feature `resume`), once a connection negotiated it.
    var session: Session?
    /// The resume window's timer while the peer is suspended, by the window's generation.
    var windowTimer: (generation: Int, timer: Timer)?
    /// The number of the next session frame from the peer on each connection (set by its
    /// `peerkit.resend`).
    var inboundNext: [ObjectIdentifier: UInt64] = [:]
    /// Whether a connection the peer dialled ever completed its handshake here: the peer dials
    /// us, so when it hears our hellos late we can leave the dialling to it.
    var dialsUs = false

    /// The connection frames for the peer go to now (nil while it switches connections).
    var active: Connection? { link.current }

    /// Whether the peer has a session that has not ended (it may be suspended).
    var hasLiveSession: Bool { session?.isEnded == false }

    /// Whether the peer counts as connected: it has a connection, switches to one, or is
    /// suspended within its resume window.
    var isConnected: Bool { link.isConnected || hasLiveSession }

    /// Whether the peer is listed as available: connected, or known to discovery.
    var isAvailable: Bool { isConnected || !serviceKeys.isEmpty }

    /// What ``ConnectionManager/outboxState(of:)`` needs: nil when the peer is not connected;
    /// else its connection (nil while it switches, or is suspended) and the bytes held meanwhile,
    /// with no connection and the most bytes there are when its session is full; and what its
    /// session's tail holds charged to the transceiver's budget. Changes nothing; it
    /// is `mutating` so that it is called on the record in its dictionary, in place
    /// (`state.peers.values[index].outboxProbe()`): a getter would be called on a copy, a retain
    /// and a release of each of its references, for every message handled. The session is read
    /// through `session?.`, in place, for the same reason: `guard let session` would copy it,
    /// its retransmit tail and waiters included.
    mutating func outboxProbe() -> (connection: Connection?, held: Int, sessionCharged: Int)? {
        guard isConnected else { return nil }
        guard let sessionCharged = session?.chargedBytes else { return (active, link.heldBytes, 0) }
        if session?.isFull == true { return (nil, .max, sessionCharged) }
        return (active, link.heldBytes, sessionCharged)
    }

    /// The peer as events and lists show it now.
    var snapshot: Peer {
        Peer(id: peer.id, name: peer.name, discoveryInfo: peer.discoveryInfo, isConnected: isConnected, fingerprint: peer.fingerprint)
    }

    /// Takes the session out of the record, to change it and store it back: while it changes,
    /// the taken value alone refers to its retransmit tail, so that the tail is not copied (a
    /// `var session = self.session` would share it with the record, and the first change would
    /// copy all of it).
    private mutating func takeSession() -> Session? {
        defer { session = nil }
        return session
    }

    // MARK: Session: a connection arrives

    /// What ``sessionArrives(incarnation:fingerprint:maximumUnacknowledgedBytes:maximumQueuedOutboundBytes:perFrameOverhead:share:)`` decided.
    struct SessionArrival {
        /// Whether the peer was suspended and resumes now, with its session: it is reported
        /// resumed, not connected.
        var resumes = false
        /// The session of an earlier run of the peer, ended with ``PeerKitError/peerRestarted(peer:)``:
        /// carry it out, and remember its error as why the peer could not be sent to.
        var ended: SessionEnd?
        /// The peer was suspended in the ended session: report this (it is disconnected with the
        /// ended session's error) before anything else about the new connection.
        var event: PeerEvent?
    }

    /// A connection of the peer's completed its handshake (before ``link`` is told of it): the
    /// same session goes on when the same run (`incarnation`) of the same authenticated peer
    /// (`fingerprint`) comes back; else the session it had ends (what was pending for a
    /// restarted peer fails, and it is reported disconnected first when it was suspended), and a
    /// new one starts when the peer offers one (`incarnation` is not nil). The new session's
    /// bound is the lower of `maximumUnacknowledgedBytes` and `maximumQueuedOutboundBytes`: its
    /// frames are the outbox's session frames too, so its bound is never looser. Each frame
    /// counts `perFrameOverhead` beyond its bytes, as in the outbox. A new session charges what
    /// its tail keeps for this peer alone to `share` (made only when a session starts).
    mutating func sessionArrives(incarnation: String?, fingerprint: String?, maximumUnacknowledgedBytes: Int, maximumQueuedOutboundBytes: Int,
                                 perFrameOverhead: Int, share: () -> OutboundBudget.Share? = { nil }) -> SessionArrival {
        if let session, !session.isEnded,
           let incarnation, session.continues(incarnation: incarnation, fingerprint: fingerprint) {
            return SessionArrival(resumes: !link.isConnected)
        }
        var arrival = SessionArrival()
        if let old = session {
            // Another run of the peer (or one without the feature now): a new session.
            let error = PeerKitError.peerRestarted(peer: safeName)
            let wasSuspended = !old.isEnded && !link.isConnected
            arrival.ended = dropSession(error)
            if wasSuspended { arrival.event = .peerDisconnected(snapshot, reason: error) }
        }
        if let incarnation {
            let bound = min(maximumUnacknowledgedBytes, maximumQueuedOutboundBytes)
            session = Session(limits: .init(maximumUnacknowledgedBytes: bound, perFrameOverhead: perFrameOverhead), remoteIncarnation: incarnation,
                              fingerprint: fingerprint, share: share())
        }
        return arrival
    }

    /// A connection of the peer's completed its handshake and ``link`` was told of it: returns
    /// the `peerkit.resume` to send first on it, nil without a session (or when it ended). On
    /// the connection that is the peer's now the session starts resuming
    /// (``PeerSession/connected()``): nothing of it is written there until the peer's resume
    /// arrives; on another (a tie-break's) the resume only says what arrived.
    mutating func sessionConnected(_ connection: Connection) -> SessionFrame.Resume? {
        guard var session = takeSession() else { return nil }
        let count = link.current === connection ? session.connected() : session.received
        self.session = session
        guard let count else { return nil }
        return session.resume(received: count)
    }

    // MARK: Session: the peer is lost, or its window ends

    /// What ending the peer's session leaves to carry out.
    struct SessionEnd {
        /// Why it ended: what its waiting senders, and later sends, throw.
        var error: PeerKitError
        /// The senders that waited for acknowledgements: resume them once the lock is released.
        var waiters: [Waiter]
        /// The resume window's timer that was armed: cancel it once the lock is released.
        var windowTimer: Timer?
    }

    /// Ends the peer's session with `error` (the peer restarted, a bound was reached, its
    /// connection closed for good): the session, its window timer and the inbound numbering are
    /// forgotten. Reports nothing: nil without a session.
    mutating func dropSession(_ error: PeerKitError) -> SessionEnd? {
        guard var session = takeSession() else { return nil }
        let waiters = session.end(error)
        inboundNext = [:]
        let timer = windowTimer?.timer
        windowTimer = nil
        return SessionEnd(error: error, waiters: waiters, windowTimer: timer)
    }

    /// The peer's name as the session's errors say it: the peer chose it, so its control
    /// characters are escaped and it is cut at 80 bytes (``LogSafe``), since these sentences are
    /// logged.
    var safeName: String { LogSafe.text(peer.name, maximumBytes: 80) }

    /// The suspended peer's process ended: its every endpoint refused our redial
    /// (``DialPlan/everyEndpointRefused``), so nothing listens where it did and its session
    /// cannot resume. Ends the session with `error` (``PeerKitError/peerExited(peer:refusals:)``)
    /// as ``dropSession(_:)`` does; the caller reports the peer disconnected with it. Nil, and
    /// nothing changed, unless the session is suspended with no connection: a peer that came
    /// back meanwhile (it dialled us) is alive, whatever its old address says.
    mutating func exited(_ error: PeerKitError) -> SessionEnd? {
        guard session?.isSuspended == true, link.current == nil else { return nil }
        return dropSession(error)
    }

    /// The peer has no connection left and its session (if any) is suspended for its resume
    /// window: returns the generation of the window's timer to arm, or nil when none is to be
    /// armed (a connection died before the peer resumed on it, so the window that already runs
    /// goes on; or there is no live session).
    mutating func suspend() -> Int? {
        guard var session = takeSession() else { return nil }
        var generation: Int?
        // Stored back whatever it returns: a connection that died before the peer's resume
        // arrived on it leaves the session suspended under the window that already runs.
        if case let .armWindowTimer(armed) = session.suspend() { generation = armed }
        self.session = session
        return generation
    }

    /// The resume window's timer of `generation` was scheduled: keeps it, unless the peer is no
    /// longer suspended (back, or gone), in which case it returns false and the timer is to be
    /// cancelled at once.
    mutating func windowTimerArmed(_ timer: Timer, generation: Int) -> Bool {
        guard session?.isSuspended == true else { return false }
        windowTimer = (generation, timer)
        return true
    }

    /// What ``windowExpired(generation:window:)`` decided.
    struct WindowExpiry {
        /// What becomes of the peer once its session ended.
        enum Then {
            /// It is connected (a connection came back but the peer did not resume on it, or it
            /// switches to a tie-break's winner): close this connection (nil while switching),
            /// failed.
            case close(Connection?)
            /// It has no connection: report it disconnected with ``WindowExpiry/error``.
            case disconnect
        }

        /// ``PeerKitError/sessionExpired(peer:window:)``: what the waiting senders throw, and
        /// why the peer cannot be sent to.
        var error: PeerKitError
        /// The senders that waited for acknowledgements: resume them once the lock is released.
        var waiters: [Waiter]
        /// What becomes of the peer.
        var then: Then
    }

    /// The resume window of `generation` (of length `window`) ran out: the session ends, and the
    /// peer is disconnected. Nil when that window is no longer current (the peer resumed) or
    /// there is no session; the record is then unchanged. The window's timer is the one that
    /// fired: it is forgotten, not cancelled.
    mutating func windowExpired(generation: Int, window: Duration) -> WindowExpiry? {
        guard var session = takeSession() else { return nil }
        let error = PeerKitError.sessionExpired(peer: safeName, window: window)
        guard let waiters = session.windowExpired(generation: generation, error: error) else {
            self.session = session
            return nil
        }
        windowTimer = nil
        inboundNext = [:]
        return WindowExpiry(error: error, waiters: waiters, then: link.isConnected ? .close(link.current) : .disconnect)
    }

    // MARK: Session: outbound

    /// Whether a frame for the peer now would end its session (``sessionBoundReached()``): the
    /// session is at its bound while the peer is away. Ending it may remove the record, so a
    /// caller walking the records' indices does that after its walk.
    var sessionEndsAtBound: Bool {
        // Read in place (no copy of the session), the connected case first: it is the common one.
        !link.isConnected && session?.isFull == true && session?.isEnded == false
    }

    /// Numbers `frame` in the session and keeps it (charged to the budget unless `charged` is
    /// false: a broadcast's); then takes what the session has not written yet (this frame, after
    /// any before it), for the current connection. Nil without a session.
    mutating func recordInSession(_ frame: ByteBuffer, charged: Bool = true) -> (outcome: Session.Record, current: Connection?, writes: Session.Writes?)? {
        guard let outcome = session?.record(frame, charged: charged) else { return nil }
        guard case .kept = outcome else { return (outcome, link.current, nil) }
        return (outcome, link.current, takeSessionWrites()?.writes)
    }

    /// What the session has not written yet, with the connection to write it on; nil when
    /// there is nothing, or no connection.
    mutating func takeSessionWrites() -> (connection: Connection, writes: Session.Writes)? {
        guard let current = link.current, let writes = session?.takeUnwritten(), !writes.isEmpty else { return nil }
        return (current, writes)
    }

    /// What becomes of the peer when its session is at its bound (``PeerSession/isFull``).
    enum BoundReached {
        /// The peer is connected, yet what was sent to it waits for its acknowledgements: a
        /// sender that can wait waits; one that cannot (or that waited in vain) fails this
        /// connection (nil while the peer switches to a tie-break's winner).
        case connected(Connection?)
        /// The peer is suspended: its session ended with
        /// ``PeerKitError/sessionBufferFull(peer:unacknowledgedBytes:limit:)``. Carry out the end,
        /// remember its error, and report the peer disconnected with it.
        case ended(SessionEnd)
    }

    /// A frame for the peer found its session at its bound. Nil without a session.
    mutating func sessionBoundReached() -> BoundReached? {
        guard let session else { return nil }
        if link.isConnected { return .connected(link.current) }
        // Suspended: the peer is disconnected, and what was pending throws why.
        let error = PeerKitError.sessionBufferFull(peer: safeName, unacknowledgedBytes: session.unacknowledgedBytes, limit: session.limits.maximumUnacknowledgedBytes)
        return dropSession(error).map(BoundReached.ended)
    }

    /// A sender waited the grace period for acknowledgements that make room, since the peer had
    /// acknowledged `acknowledged` frames: when none came and the session is still at its bound,
    /// what ``sessionBoundReached()`` decides; else nil (room was made, or there is no session).
    mutating func acknowledgementsOverdue(since acknowledged: UInt64) -> BoundReached? {
        guard let session, session.isFull, session.acknowledged == acknowledged else { return nil }
        return sessionBoundReached()
    }

    // MARK: Session: the peer's control frames

    /// The peer ended its side of the session while this side kept it, and the session started
    /// again (``PeerSession/Resumed/restarted(generation:lostFrames:lostBytes:waiters:)``).
    struct SessionRestart {
        /// The peer, as the ``ConnectionEvent/sessionRestarted(_:reason:)`` event shows it.
        var peer: Peer
        /// How many frames written to the peer and not acknowledged may not have arrived.
        var lostFrames: Int
        /// Their bytes.
        var lostBytes: Int
        /// ``PeerKitError/peerEndedSession(peer:lostMessages:)``: the event's reason.
        var reason: PeerKitError
    }

    /// What ``sessionControl(_:on:)`` asks of the manager.
    struct SessionControlOutcome {
        /// The peer resumed on its current connection: write what the session has not written
        /// (``takeSessionWrites()``) now.
        var writesSession = false
        /// When ``writesSession``: how many unacknowledged frames go out again.
        var resending = 0
        /// Senders to resume once the lock is released (an acknowledgement made room, or a
        /// restart dropped frames).
        var waiters: [Waiter] = []
        /// The resume window's timer to cancel once the lock is released (the peer resumed).
        var windowTimer: Timer?
        /// The peer broke the protocol: fail its connection with this (a sentence fragment).
        var violation: String?
        /// The peer ended its side of the session: report and log it.
        var restart: SessionRestart?
    }

    /// A `peerkit.resume`, `peerkit.resend` or `peerkit.ack` from the peer on `connection`.
    ///
    /// A resume on the peer's current connection while the session waits for it resumes the
    /// session (or restarts it, when the peer ended its side); on another connection (a
    /// tie-break's), or once resumed, it acknowledges. An acknowledgement frees what it covers.
    /// A resend sets the number of the peer's next session frame on `connection`. Nothing
    /// happens without a session.
    mutating func sessionControl(_ frame: SessionFrame, on connection: Connection) -> SessionControlOutcome {
        var outcome = SessionControlOutcome()
        guard var session = takeSession() else { return outcome }
        outcome.writesSession = applyControl(frame, on: connection, session: &session, outcome: &outcome)
        if outcome.writesSession { outcome.resending = session.unacknowledgedCount }
        self.session = session
        return outcome
    }

    /// Applies the peer's control `frame` to `session` (taken out of the record); returns
    /// whether the session's frames are to be written now (the peer resumed).
    private mutating func applyControl(_ frame: SessionFrame, on connection: Connection, session: inout Session, outcome: inout SessionControlOutcome) -> Bool {
        switch frame {
        case let .resume(resume) where link.current === connection && !session.isSuspended && session.phase != .active:
            switch session.peerResumed(resume) {
            case .resumed:
                outcome.windowTimer = windowTimer?.timer
                windowTimer = nil
                return true
            case let .restarted(_, frames, bytes, waiters):
                outcome.windowTimer = windowTimer?.timer
                windowTimer = nil
                outcome.waiters += waiters
                outcome.restart = SessionRestart(peer: snapshot, lostFrames: frames, lostBytes: bytes,
                                                 reason: .peerEndedSession(peer: safeName, lostMessages: frames))
                return true
            case let .invalid(reason):
                outcome.violation = reason
            }
        case let .resume(resume):
            // On a connection that is not the peer's (a tie-break's), a resume of this session acknowledges.
            switch session.acknowledged(by: resume) {
            case let .freed(_, waiters): outcome.waiters += waiters
            case .stale: break
            case let .invalid(reason): outcome.violation = reason
            }
        case let .ack(received):
            switch session.acknowledged(through: received) {
            case let .freed(_, waiters): outcome.waiters += waiters
            case .stale: break
            case let .invalid(reason): outcome.violation = reason
            }
        case let .resend(from):
            guard from >= 1 else {
                outcome.violation = "its peerkit.resend names session frame 0, and they are numbered from 1"
                return false
            }
            inboundNext[ObjectIdentifier(connection)] = from
        }
        return false
    }

    // MARK: Session: the peer's numbered frames

    /// What the session decided about one of the peer's numbered frames.
    enum Numbered: Equatable {
        /// Hand it on; acknowledge `acknowledge` now, arm the acknowledgement timer when `armTimer`.
        case deliver(acknowledge: UInt64?, armTimer: Bool)
        /// A duplicate (or the peer has no session any more): drop it.
        case drop
        /// A gap: the peer broke the protocol.
        case violation(String)
    }

    /// Holds `envelope`, a frame without a session number, when the peer may still be writing on
    /// a tie-break's loser (which comes first) or held frames are being handed on: it joins
    /// ``heldInbound``, and the result is true. Called in place for every message
    /// (`state.peers.values[index].holdInbound(…)`, see ``outboxProbe()``).
    ///
    /// The envelope is taken only when it is held (`@autoclosure`): the common case, nothing held,
    /// then costs no copy of it.
    mutating func holdInbound(_ envelope: @autoclosure () -> Envelope, on connection: Connection) -> Bool {
        guard releasingInbound || link.holdsInbound(from: connection) else { return false }
        heldInbound.append((envelope(), connection, nil))
        return true
    }

    /// Numbers the peer's next session frame on `connection` and decides what becomes of it:
    /// held behind frames already held (it joins ``heldInbound``, so that it overtakes none), or
    /// what the session says.
    ///
    /// Unlike a frame without a number (``holdInbound(_:on:)``), a session frame on a tie-break's
    /// winner does not wait for the loser to close: its number orders it. The winner's first frame
    /// is at most one past what this side had received when it sent its resume there, and each
    /// connection's frames are consecutive, so whichever connection a frame comes on, it is the
    /// next one (taken) or one received already (a duplicate, dropped), never a gap. Waiting would
    /// only delay the winner's frames by up to the handshake timeout when the loser is a link the
    /// peer lost one way (its address went away, its pings still arrive).
    mutating func receiveNumbered(_ envelope: Envelope, on connection: Connection) -> (outcome: Numbered, held: Bool) {
        receiveNumbered(envelope, bytes: Self.sessionBytes(of: envelope), on: connection)
    }

    /// ``receiveNumbered(_:on:)`` for a frame of `bytes` session bytes (``sessionBytes(of:)``),
    /// taken only when it is held (`@autoclosure`): the common case then costs no copy of it.
    /// The connection manager calls this one, once per frame received.
    mutating func receiveNumbered(_ envelope: @autoclosure () -> Envelope, bytes: Int, on connection: Connection) -> (outcome: Numbered, held: Bool) {
        guard session != nil else { return (.drop, false) }
        // One lookup, not a read and a write: this runs for every frame received.
        guard let slot = inboundNext.index(forKey: ObjectIdentifier(connection)) else {
            return (.violation("it sent a message before peerkit.resend on a connection with the resume feature"), false)
        }
        let sequence = inboundNext.values[slot]
        inboundNext.values[slot] = sequence + 1
        if releasingInbound || !heldInbound.isEmpty {
            heldInbound.append((envelope(), connection, sequence))
            return (.drop, true)
        }
        return (takeNumbered(sequence, bytes: bytes), false)
    }

    /// What a session frame counts in its session: its payload and its type.
    static func sessionBytes(of envelope: Envelope) -> Int {
        envelope.payload.readableBytes + envelope.type.utf8.count
    }

    /// Takes the peer's session frame `sequence` into the session.
    mutating func takeNumbered(_ sequence: UInt64, of envelope: Envelope) -> Numbered {
        takeNumbered(sequence, bytes: Self.sessionBytes(of: envelope))
    }

    /// ``takeNumbered(_:of:)`` for a frame of `bytes` session bytes.
    private mutating func takeNumbered(_ sequence: UInt64, bytes: Int) -> Numbered {
        switch session?.receive(sequence: sequence, bytes: bytes) {
        case let .deliver(acknowledge, armTimer)?: return .deliver(acknowledge: acknowledge, armTimer: armTimer)
        case .duplicate?, nil: return .drop
        case let .gap(reason)?: return .violation(reason)
        }
    }

    /// The acknowledgement timer fired: the count to acknowledge with `peerkit.ack` and the
    /// connection to send it on (the peer's current one), or nil when nothing is new, the peer
    /// has not resumed, or it has no connection now.
    mutating func acknowledgementTimerFired() -> (count: UInt64, connection: Connection)? {
        guard let count = session?.acknowledgementTimerFired(), let current = link.current else { return nil }
        return (count, current)
    }
}

extension PeerRecord: Sendable where Connection: Sendable, Timer: Sendable, Waiter: Sendable {}
extension PeerRecord.SessionArrival: Sendable where Timer: Sendable, Waiter: Sendable {}
extension PeerRecord.SessionEnd: Sendable where Timer: Sendable, Waiter: Sendable {}
extension PeerRecord.BoundReached: Sendable where Connection: Sendable, Timer: Sendable, Waiter: Sendable {}
extension PeerRecord.WindowExpiry: Sendable where Connection: Sendable, Waiter: Sendable {}
extension PeerRecord.WindowExpiry.Then: Sendable where Connection: Sendable {}
