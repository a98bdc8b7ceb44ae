import NIOCore

/// One resumable session between this transceiver and a peer (feature `resume`): what lets a
/// link that drops for a few seconds lose nothing, duplicate nothing and reorder nothing.
///
///                     ┌──────────── peerResumed(received:) ───────────┐
///                     │                                                ▼
///     resuming(g) ◀──connected()── suspended(g) ◀──suspend()── active ◀──takeUnwritten() empty── flushing
///          │                           │                         ▲
///          └── windowExpired(g) ───────┴──▶ ended(error) ◀── end(error): a new session, stop, a violation
///
/// **Sequence numbers.** Every frame a user's call produced (a message, request, reply, group
/// message) is a *session frame*, numbered from 1 in each direction. The numbers are implicit:
/// the n-th session frame a side sends is number n. They are never written in the frame, because
/// TCP already keeps order and drops duplicates within one connection; numbers need agreeing only
/// at the seam between two connections, where `peerkit.resume` does it. So a frame is encoded
/// once for every peer it goes to (a broadcast), and the hot path adds no byte to it.
///
/// **Outbound.** ``record(_:)`` numbers a frame and keeps it in the retransmit tail until the
/// peer acknowledges it (``acknowledged(through:)``, cumulative: "received through n"). The tail
/// is bounded by ``Limits/maximumUnacknowledgedBytes`` at every moment: a frame that would take
/// it over is refused (``Record/full(unacknowledgedBytes:)``) unless the tail is empty (so one
/// frame larger than the bound still goes, alone). Senders that can wait leave a waiter
/// (``wait(_:)``), resumed when an acknowledgement frees room or the session ends.
///
/// **Inbound.** ``received(bytes:)`` counts the peer's session frames as they are handed on, in
/// order, and says when to acknowledge: at once after ``Limits/acknowledgeAfterBytes`` bytes
/// unacknowledged, else after a short delay (the driver arms the timer once, and
/// ``acknowledgementTimerFired()`` says what to acknowledge then). Never one acknowledgement per
/// message.
///
/// **Resume.** A session starts in ``Phase/resuming(generation:)``: on every new connection
/// (``connected()``), each side first sends `peerkit.resume` with how many session frames it
/// received; the peer's (``peerResumed(received:)``) frees what it acknowledges and returns the
/// rest of the tail, to be written once, in order, before anything new (``Phase/flushing``:
/// frames recorded meanwhile are written after it, ``takeUnwritten()``). When the connection dies
/// the session is ``suspend()``ed for the resume window; frames are kept (up to the bound) and
/// nothing is written. ``windowExpired(generation:)`` ends it; what was pending fails with the
/// error it returns.
///
/// A value type with no I/O and no clock: the driver arms the window and acknowledgement timers
/// when told to, and feeds back their firing. `Waiter` is whatever a sender leaves to be resumed.
struct PeerSession<Waiter> {
    /// The bounds and the acknowledgement policy.
    struct Limits: Sendable, Equatable {
        /// The most bytes of session frames kept unacknowledged
        /// (``PeerConfiguration/maximumUnacknowledgedBytes``).
        var maximumUnacknowledgedBytes: Int
        /// Acknowledge at once when this many bytes were received since the last acknowledgement;
        /// a quarter of the peer's bound keeps its tail flowing without an acknowledgement per message.
        var acknowledgeAfterBytes: Int

        init(maximumUnacknowledgedBytes: Int, acknowledgeAfterBytes: Int? = nil) {
            self.maximumUnacknowledgedBytes = maximumUnacknowledgedBytes
            self.acknowledgeAfterBytes = acknowledgeAfterBytes ?? max(1, min(maximumUnacknowledgedBytes / 4, Self.defaultAcknowledgeAfterBytes))
        }

        /// At most 256 KiB between acknowledgements: a few hundred 100-byte messages, and a small
        /// part of any sensible bound.
        static var defaultAcknowledgeAfterBytes: Int { 256 * 1024 }
    }

    /// Where the session is.
    enum Phase: Equatable {
        /// Waiting for the peer's `peerkit.resume` on a new connection; frames are kept, not written.
        /// `generation` names the window timer that runs meanwhile (0: a new session, no timer).
        case resuming(generation: Int)
        /// The tail the peer did not receive was returned to be written; frames recorded now are
        /// written after it (``takeUnwritten()``).
        case flushing
        /// Frames are written as they are recorded.
        case active
        /// No connection: frames are kept, up to the bound, for the resume window of `generation`.
        case suspended(generation: Int)
        /// The session is over; nothing more is kept.
        case ended(PeerKitError)
    }

    let limits: Limits
    /// The peer's incarnation (the `session` of its hello): a restarted peer has another one.
    let remoteIncarnation: String
    /// The peer's certificate fingerprint (certificates mode), which a resume must present again.
    let fingerprint: String?

    private(set) var phase: Phase = .resuming(generation: 0)

    // Outbound.
    /// The number of the last frame recorded.
    private(set) var sent: UInt64 = 0
    /// The peer received everything through this number.
    private(set) var acknowledged: UInt64 = 0
    /// Frames `acknowledged + 1 ... sent`, oldest first.
    private var tail = CircularBuffer<ByteBuffer>()
    /// Their bytes.
    private(set) var unacknowledgedBytes = 0
    /// Frames recorded while ``Phase/flushing``, to be written after the resent tail.
    private var unwritten = CircularBuffer<ByteBuffer>()
    private var waiters: [Waiter] = []
    private var generation = 0

    // Inbound.
    /// How many of the peer's session frames were handed on.
    private(set) var received: UInt64 = 0
    /// The last count sent to the peer in an acknowledgement (or a resume).
    private(set) var acknowledgedToPeer: UInt64 = 0
    private var bytesSinceAcknowledgement = 0
    private var acknowledgementTimerArmed = false

    init(limits: Limits, remoteIncarnation: String, fingerprint: String?) {
        self.limits = limits
        self.remoteIncarnation = remoteIncarnation
        self.fingerprint = fingerprint
    }

    /// How many frames wait unacknowledged.
    var unacknowledgedCount: Int { tail.count }

    /// How many senders wait for room.
    var waiterCount: Int { waiters.count }

    /// Whether the session is over.
    var isEnded: Bool {
        if case .ended = phase { return true }
        return false
    }

    /// Whether the peer has no connection now (suspended within its window).
    var isSuspended: Bool {
        if case .suspended = phase { return true }
        return false
    }

    /// Whether a connection of `incarnation` presenting `fingerprint` may continue this session:
    /// the same process of the same peer, authenticated the same way. A restarted peer (another
    /// incarnation) or another key is a new session.
    func continues(incarnation: String, fingerprint: String?) -> Bool {
        !isEnded && incarnation == remoteIncarnation && fingerprint == self.fingerprint
    }

    // MARK: Outbound

    /// What ``record(_:)`` did with a frame.
    enum Record: Equatable {
        /// Numbered `sequence` and kept: write it on the connection now.
        case write(sequence: UInt64)
        /// Numbered `sequence` and kept: it goes out later (after a resume, or behind the tail).
        case kept(sequence: UInt64)
        /// Not kept: the tail holds `unacknowledgedBytes`, and this frame would take it over the bound.
        case full(unacknowledgedBytes: Int)
        /// Not kept: the session ended, for this reason.
        case ended(PeerKitError)
    }

    /// Numbers a session frame and keeps it until the peer acknowledges it.
    mutating func record(_ frame: ByteBuffer) -> Record {
        if case let .ended(error) = phase { return .ended(error) }
        let size = frame.readableBytes
        guard tail.isEmpty || unacknowledgedBytes + size <= limits.maximumUnacknowledgedBytes else {
            return .full(unacknowledgedBytes: unacknowledgedBytes)
        }
        sent += 1
        tail.append(frame)
        unacknowledgedBytes += size
        switch phase {
        case .active:
            return .write(sequence: sent)
        case .flushing:
            unwritten.append(frame)
            return .kept(sequence: sent)
        case .resuming, .suspended, .ended:
            return .kept(sequence: sent)
        }
    }

    /// What ``acknowledged(through:)`` decided.
    enum Acknowledged {
        /// Frames through the number were freed: `bytes` of them. Resume `waiters`: there is room.
        case freed(bytes: Int, waiters: [Waiter])
        /// Nothing new (an older or repeated acknowledgement).
        case stale
        /// The peer acknowledged frames never sent: a protocol violation (a sentence fragment).
        case invalid(String)
    }

    /// The peer received every session frame through `count`.
    mutating func acknowledged(through count: UInt64) -> Acknowledged {
        if isEnded { return .stale }
        guard count <= sent else {
            return .invalid("it acknowledged \(count) session frames, but only \(sent) were sent to it")
        }
        guard count > acknowledged else { return .stale }
        let bytes = drop(through: count)
        defer { waiters = [] }
        return .freed(bytes: bytes, waiters: waiters)
    }

    /// Frees the frames through `count` (at most ``sent``); returns their bytes.
    private mutating func drop(through count: UInt64) -> Int {
        var freed = 0
        while acknowledged < count, let frame = tail.popFirst() {
            freed += frame.readableBytes
            acknowledged += 1
        }
        unacknowledgedBytes -= freed
        return freed
    }

    /// What ``wait(_:)`` decided.
    enum Wait: Equatable {
        /// Do not wait: record again now (there is room, or the session ended).
        case now
        /// Wait: the waiter is resumed when an acknowledgement frees room, or the session ends.
        case waiting
    }

    /// Leaves `waiter` to be resumed when the tail has room for a frame of `bytes`.
    mutating func wait(_ waiter: Waiter, bytes: Int) -> Wait {
        guard !isEnded, !tail.isEmpty, unacknowledgedBytes + bytes > limits.maximumUnacknowledgedBytes else { return .now }
        waiters.append(waiter)
        return .waiting
    }

    // MARK: Inbound

    /// What ``received(bytes:)`` asks of the driver.
    enum Receive: Equatable {
        /// Send `peerkit.ack` with this count now.
        case acknowledge(UInt64)
        /// Arm the acknowledgement timer (it is not armed yet); call ``acknowledgementTimerFired()``.
        case armAcknowledgementTimer
        /// Nothing to do: the timer is armed.
        case none
    }

    /// One session frame of `bytes` from the peer was handed on, in order. Returns its number and
    /// what to do about acknowledging it.
    mutating func received(bytes: Int) -> (sequence: UInt64, action: Receive) {
        received += 1
        bytesSinceAcknowledgement += bytes
        if bytesSinceAcknowledgement >= limits.acknowledgeAfterBytes {
            return (received, .acknowledge(acknowledgeNow()))
        }
        if acknowledgementTimerArmed { return (received, .none) }
        acknowledgementTimerArmed = true
        return (received, .armAcknowledgementTimer)
    }

    /// The acknowledgement timer fired: the count to acknowledge, or nil when nothing is new
    /// (or there is no connection to send it on: the resume says it).
    mutating func acknowledgementTimerFired() -> UInt64? {
        acknowledgementTimerArmed = false
        guard case .active = phase, received > acknowledgedToPeer else { return nil }
        return acknowledgeNow()
    }

    private mutating func acknowledgeNow() -> UInt64 {
        bytesSinceAcknowledgement = 0
        acknowledgedToPeer = received
        return received
    }

    // MARK: Connections

    /// A new connection to the peer completed its handshake (the session's first, or one after a
    /// suspension). Returns the count to send in `peerkit.resume`, first on the connection;
    /// until the peer's resume arrives, frames are kept, not written. Nil when the session ended.
    mutating func connected() -> UInt64? {
        switch phase {
        case .ended:
            return nil
        case let .suspended(generation):
            phase = .resuming(generation: generation)
        case .resuming:
            // A connection that died (or was replaced) before the peer's resume came: the
            // window timer that runs, if any, goes on.
            unwritten.removeAll()
        case .active, .flushing:
            // A connection replaced another one not yet noticed dead: what was written on that
            // one and not acknowledged is resent on this one, from what the peer says it got.
            unwritten.removeAll()
            generation += 1
            phase = .resuming(generation: generation)
        }
        bytesSinceAcknowledgement = 0
        acknowledgedToPeer = received
        return received
    }

    /// What ``peerResumed(received:)`` asks of the driver.
    enum Resumed {
        /// Write `frames` on the connection, in order, before anything else; then take what was
        /// recorded meanwhile (``takeUnwritten()``). Cancel the window timer of `generation`.
        case resend(frames: CircularBuffer<ByteBuffer>, generation: Int)
        /// The peer's count is impossible (a protocol violation: a sentence fragment).
        case invalid(String)
    }

    /// The peer's `peerkit.resume` arrived: it received `count` of our session frames.
    mutating func peerResumed(received count: UInt64) -> Resumed {
        guard case let .resuming(generation) = phase else {
            return .invalid("it sent peerkit.resume again on a connection that had resumed")
        }
        guard count >= acknowledged else {
            return .invalid("it resumed having received \(count) session frames, fewer than the \(acknowledged) it had acknowledged")
        }
        guard count <= sent else {
            return .invalid("it resumed having received \(count) session frames, but only \(sent) were sent to it")
        }
        _ = drop(through: count)
        phase = .flushing
        unwritten.removeAll()
        return .resend(frames: tail, generation: generation)
    }

    /// Takes the frames recorded while the tail was resent, to be written after it. Returns an
    /// empty buffer (and the session is then ``Phase/active``) once nothing is left; call again
    /// after writing what it returned.
    mutating func takeUnwritten() -> CircularBuffer<ByteBuffer> {
        guard case .flushing = phase else { return [] }
        if unwritten.isEmpty {
            phase = .active
            return []
        }
        defer { unwritten = [] }
        return unwritten
    }

    /// What ``suspend()`` asks of the driver.
    enum Suspend: Equatable {
        /// Arm the resume window's timer for `generation`; the peer counts as suspended.
        case armWindowTimer(generation: Int)
        /// Already suspended (its window runs) or ended: nothing to do.
        case none
    }

    /// The connection in use died (timed out, reset): keep everything for the resume window.
    mutating func suspend() -> Suspend {
        switch phase {
        case .ended, .suspended:
            return .none
        case .active, .flushing, .resuming:
            generation += 1
            unwritten.removeAll()
            acknowledgementTimerArmed = false
            phase = .suspended(generation: generation)
            return .armWindowTimer(generation: generation)
        }
    }

    /// The resume window of `generation` ran out. Returns the waiters to resume (the session then
    /// ended with `error`), or nil when that window is no longer current (the peer resumed).
    mutating func windowExpired(generation expired: Int, error: PeerKitError) -> [Waiter]? {
        switch phase {
        case let .suspended(generation) where generation == expired,
             let .resuming(generation) where generation == expired && expired > 0:
            return end(error)
        default:
            return nil
        }
    }

    /// Ends the session with `error` (the peer restarted, broke the protocol, the transceiver
    /// stopped): drops the tail; returns the waiters to resume. Frames recorded from now on are
    /// refused with `error`.
    mutating func end(_ error: PeerKitError) -> [Waiter] {
        if isEnded { return [] }
        phase = .ended(error)
        tail.removeAll()
        unwritten.removeAll()
        unacknowledgedBytes = 0
        defer { waiters = [] }
        return waiters
    }
}

extension PeerSession: Sendable where Waiter: Sendable {}
extension PeerSession.Acknowledged: Sendable where Waiter: Sendable {}
