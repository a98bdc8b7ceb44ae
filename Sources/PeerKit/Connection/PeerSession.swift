import DequeModule
import NIOCore

/// One resumable session between this transceiver and a peer (feature `resume`): what lets a
/// link that drops for a few seconds lose nothing, duplicate nothing and reorder nothing.
///
///     resuming(g) ──peerResumed(_:)──▶ active ──suspend()──▶ suspended(g)
///          ▲                                    │                        │
///          └──────────── connected() ───────────┴────── connected() ─────┘
///     suspended(g) or resuming(g) ──windowExpired(g)──▶ ended(error) ◀── end(error): a new session, stop, a violation
///
/// **Sequence numbers.** Every frame a user's call produced (a message, request, reply, group
/// message) is a *session frame*, numbered from 1 in each direction. The numbers are not written
/// in each frame: TCP keeps order and drops duplicates within one connection, so a connection
/// only needs the number of its first session frame, which the sender writes once before it
/// (`peerkit.resend`, ``Writes/from``); each later frame on that connection is one more. So a
/// frame is encoded once for every peer it goes to (a broadcast), and the hot path adds no byte.
///
/// **Outbound.** ``record(_:charged:)`` numbers a frame and keeps it in the retransmit tail until the
/// peer acknowledges it (``acknowledged(through:)``, cumulative: "received through n"). The tail
/// is bounded by ``Limits/maximumUnacknowledgedBytes`` at every moment: a frame is taken while
/// the tail holds less than the bound, so it holds at most the bound plus one frame. Senders that
/// can wait leave a waiter (``wait(_:)``), resumed when an acknowledgement frees room or the
/// session ends. ``takeUnwritten()`` hands over the frames not yet written on the current
/// connection, in order (the manager appends them to the connection's outbox under the same lock
/// as the call, so that the wire order is the numbering's). A frame made for this peer alone is
/// charged to the transceiver's ``OutboundBudget`` (``share``) for as long as the tail keeps it; a
/// broadcast's (one buffer in every peer's tail) is not.
///
/// **Inbound.** ``receive(sequence:bytes:)`` takes the peer's session frames in order: a number
/// already received is a duplicate (dropped; a resent tail overlapping what arrived on a closing
/// connection), a number beyond the next is a gap (a protocol violation). It says when to
/// acknowledge: at once after ``Limits/acknowledgeAfterBytes`` bytes, else once per
/// ``acknowledgementDelay`` (the driver arms the timer, ``acknowledgementTimerFired()``). Never
/// one acknowledgement per message.
///
/// **Resume.** On every new connection that becomes the peer's (``connected()``), each side
/// first sends `peerkit.resume` with how many session frames it received, and writes no session
/// frame until the peer's resume arrives there (``peerResumed(_:)``): that frees what it
/// acknowledges, and the rest of the tail is written once, in order, before anything new. When the
/// connection dies the session is ``suspend()``ed for the resume window: frames are kept (up to
/// the bound) and nothing is written. ``windowExpired(generation:error:)`` ends it.
///
/// **Epochs.** Each side ends a session on its own clock (its resume window, its bound), so one
/// side may go on with a session the other ended. Each resume therefore names the session: this
/// side's ``epoch`` (drawn anew for each session) and the peer's as this side knows it
/// (``peerEpoch``, learnt from the first of its resumes read in the session). A count is about the
/// session those two name. A peer whose resume names another epoch than the one known ended its
/// side: this side's session starts again with it (``Resumed/restarted(generation:lostFrames:lostBytes:waiters:)``):
/// what was written to it and not acknowledged may not have arrived and is dropped, and what was
/// never written anywhere goes on, numbered from 1. A resume naming another epoch of ours than
/// ``epoch`` is about a session of ours that ended: the peer received nothing of this one.
///
/// A value type with no I/O and no clock: the driver arms the window and acknowledgement timers
/// when told to, and feeds back their firing. `Waiter` is whatever a sender leaves to be resumed.
struct PeerSession<Waiter> {
    /// The bounds and the acknowledgement policy.
    struct Limits: Sendable, Equatable {
        /// The most bytes of session frames kept unacknowledged (plus one frame)
        /// (``PeerConfiguration/maximumUnacknowledgedBytes``).
        var maximumUnacknowledgedBytes: Int
        /// Acknowledge at once when this many bytes were received since the last acknowledgement;
        /// a quarter of the peer's bound keeps its tail flowing without an acknowledgement per message.
        var acknowledgeAfterBytes: Int
        /// What each kept frame counts beyond its bytes against the bound, for what it costs in
        /// memory (``PeerConnection/perFrameOverhead`` for a transceiver's sessions).
        var perFrameOverhead: Int

        init(maximumUnacknowledgedBytes: Int, acknowledgeAfterBytes: Int? = nil, perFrameOverhead: Int = 0) {
            self.maximumUnacknowledgedBytes = maximumUnacknowledgedBytes
            self.perFrameOverhead = perFrameOverhead
            self.acknowledgeAfterBytes = acknowledgeAfterBytes ?? max(1, min(maximumUnacknowledgedBytes / 4, Self.defaultAcknowledgeAfterBytes))
        }

        /// At most 256 KiB between acknowledgements: a few thousand 100-byte messages, and a small
        /// part of any sensible bound.
        static var defaultAcknowledgeAfterBytes: Int { 256 * 1024 }
    }

    /// How long a receiver waits before acknowledging what came in fewer than
    /// ``Limits/acknowledgeAfterBytes``: 50 ms, so an idle link sees at most 20 acknowledgements
    /// a second per busy peer, and a sender's tail is freed well within a heartbeat.
    static var acknowledgementDelay: Duration { .milliseconds(50) }

    /// Where the session is.
    enum Phase: Equatable {
        /// A connection is the peer's, and its `peerkit.resume` has not arrived there yet:
        /// frames are kept, not written. `generation` names the window timer that runs meanwhile
        /// (0: none, as for a new session).
        case resuming(generation: Int)
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
    /// This side's epoch: a random string naming this session in every resume of ours.
    let epoch: String
    /// The peer's epoch, from the first of its resumes read in this session: nil before it, and for
    /// a peer that names none.
    private(set) var peerEpoch: String?
    /// The session's part of the transceiver's ``OutboundBudget``: the charged frames of its tail
    /// (nil: none is kept, as in tests of the session alone). A reference: copies of a session
    /// share it, so only one copy is changed (the record's, see ``PeerRecord``), as for the tail.
    let share: OutboundBudget.Share?

    private(set) var phase: Phase = .resuming(generation: 0)

    // Outbound.
    /// The number of the last frame recorded.
    private(set) var sent: UInt64 = 0
    /// The peer received everything through this number.
    private(set) var acknowledged: UInt64 = 0
    /// Frames `acknowledged + 1 ... sent`, oldest first, each with whether it is charged to the
    /// budget. A `Deque`, whose `popFirst()` moves the frame out: `CircularBuffer`'s returns a
    /// copy and then clears the slot, a retain and a release of every frame acknowledged.
    private var tail = Deque<(frame: ByteBuffer, charged: Bool)>()
    /// What they count against the bound: their bytes and the per-frame overhead.
    private(set) var unacknowledgedBytes = 0
    /// How many of the tail's first frames were handed to the current connection.
    private var written = 0
    /// The highest number ever handed to a connection: frames after it were never written anywhere.
    private var highestWritten: UInt64 = 0
    /// Whether the next frames handed to the current connection start it (``Writes/from``).
    private var startsConnection = false
    private var waiters: [Waiter] = []
    private var generation = 0

    // Inbound.
    /// How many of the peer's session frames were taken, in order.
    private(set) var received: UInt64 = 0
    /// The last count sent to the peer in an acknowledgement (or a resume).
    private(set) var acknowledgedToPeer: UInt64 = 0
    private var bytesSinceAcknowledgement = 0
    private var acknowledgementTimerArmed = false

    init(limits: Limits, remoteIncarnation: String, fingerprint: String?, epoch: String = SessionFrame.Resume.newEpoch(), share: OutboundBudget.Share? = nil) {
        self.limits = limits
        self.remoteIncarnation = remoteIncarnation
        self.fingerprint = fingerprint
        self.epoch = epoch
        self.share = share
    }

    /// How many frames wait unacknowledged.
    var unacknowledgedCount: Int { tail.count }

    /// What of ``unacknowledgedBytes`` is charged to the budget (the frames made for this peer
    /// alone): ``share``'s count, 0 without one.
    var chargedBytes: Int { share?.bytes ?? 0 }

    /// How many senders wait for room.
    var waiterCount: Int { waiters.count }

    /// Whether the tail is at its bound: a frame recorded now is refused.
    var isFull: Bool { unacknowledgedBytes >= limits.maximumUnacknowledgedBytes && !tail.isEmpty }

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

    /// What ``record(_:charged:)`` did with a frame.
    enum Record: Equatable {
        /// Numbered `sequence` and kept until acknowledged; ``takeUnwritten()`` hands it on.
        case kept(sequence: UInt64)
        /// Not kept: the tail holds `unacknowledgedBytes`, at or over the bound.
        case full(unacknowledgedBytes: Int)
        /// Not kept: the session ended, for this reason.
        case ended(PeerKitError)
    }

    /// What `frame` counts against the bound while it is kept: its bytes and the per-frame overhead.
    private func cost(of frame: ByteBuffer) -> Int {
        frame.readableBytes + limits.perFrameOverhead
    }

    /// Numbers a session frame and keeps it until the peer acknowledges it. A `charged` frame
    /// (made for this peer alone) counts against the transceiver's budget meanwhile; a
    /// broadcast's, one buffer in every peer's tail, does not.
    mutating func record(_ frame: ByteBuffer, charged: Bool = true) -> Record {
        if case let .ended(error) = phase { return .ended(error) }
        guard !isFull else { return .full(unacknowledgedBytes: unacknowledgedBytes) }
        sent += 1
        tail.append((frame, charged))
        let cost = cost(of: frame)
        unacknowledgedBytes += cost
        if charged { share?.added(cost) }
        return .kept(sequence: sent)
    }

    /// Takes `count` frames off the tail's head; returns what they counted against the bound, and
    /// gives back what of it was charged.
    private mutating func popFirst(_ count: Int) -> Int {
        var bytes = 0
        var charged = 0
        for _ in 0..<count {
            guard let (frame, isCharged) = tail.popFirst() else { break }
            let cost = cost(of: frame)
            bytes += cost
            if isCharged { charged += cost }
        }
        unacknowledgedBytes -= bytes
        share?.removed(charged)
        return bytes
    }

    /// The tail's frames from the `written`th on, in order.
    private func unwrittenFrames() -> Frames {
        // Most often the frame just numbered alone: no array for it.
        if written == tail.count - 1, let last = tail.last { return .one(last.frame) }
        return .several(tail[tail.index(tail.startIndex, offsetBy: written)...].map(\.frame))
    }

    /// Frames to write on the current connection, in order.
    struct Writes {
        /// Set when these are the first on the connection since the peer's resume: write
        /// `peerkit.resend` with this number (the first frame's) before them.
        var from: UInt64?
        var frames: Frames

        var isEmpty: Bool { from == nil && frames.isEmpty }
    }

    /// The frames of ``Writes``, in order. One frame, what a send most often takes, is held
    /// without an array: a send with a session then allocates nothing for its own write.
    enum Frames: RandomAccessCollection {
        case one(ByteBuffer)
        case several([ByteBuffer])

        static var empty: Frames { .several([]) }

        var startIndex: Int { 0 }
        var endIndex: Int {
            switch self {
            case .one: 1
            case let .several(frames): frames.count
            }
        }

        subscript(position: Int) -> ByteBuffer {
            switch self {
            case let .one(frame):
                precondition(position == 0, "Index out of range")
                return frame
            case let .several(frames):
                return frames[position]
            }
        }
    }

    /// Takes the frames not yet written on the current connection (only while ``Phase/active``).
    /// What it returns must be queued for the connection before anything taken by a later call
    /// (the manager does both under one lock), so that frames go out in the order they were numbered.
    mutating func takeUnwritten() -> Writes {
        guard case .active = phase else { return Writes(from: nil, frames: .empty) }
        let from = startsConnection ? acknowledged + UInt64(written) + 1 : nil
        startsConnection = false
        guard written < tail.count else { return Writes(from: from, frames: .empty) }
        let frames = unwrittenFrames()
        written = tail.count
        highestWritten = max(highestWritten, acknowledged + UInt64(written))
        return Writes(from: from, frames: frames)
    }

    /// The transceiver stops, gracefully, with a connection to the peer: takes the frames not yet
    /// written on it, whatever the phase, since a stop gets no other chance to send them. Before
    /// the peer's resume arrived (``Phase/resuming``) that is the whole unacknowledged tail, from
    /// the first frame the peer did not acknowledge: the peer drops those it has already
    /// (`peerkit.resend` says where they start), and its acknowledgements never run ahead of
    /// what it received, so no gap can appear. Suspended or ended: nothing (no connection).
    mutating func takeUnwrittenForStop() -> Writes {
        switch phase {
        case .active:
            return takeUnwritten()
        case .resuming:
            guard written < tail.count else { return Writes(from: nil, frames: .empty) }
            let from = written == 0 ? acknowledged + 1 : nil
            let frames = unwrittenFrames()
            written = tail.count
            highestWritten = max(highestWritten, acknowledged + UInt64(written))
            startsConnection = false
            return Writes(from: from, frames: frames)
        case .suspended, .ended:
            return Writes(from: nil, frames: .empty)
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

    /// The peer's `peerkit.resume` arrived on a connection that is not its current one (a
    /// tie-break's): it acknowledges, when it is about this session (its epochs are ours, or it
    /// names none).
    mutating func acknowledged(by resume: SessionFrame.Resume) -> Acknowledged {
        if resume.epoch != nil, resume.epoch != peerEpoch || resume.peerEpoch != epoch { return .stale }
        return acknowledged(through: resume.received)
    }

    /// Frees the frames through `count` (at most ``sent``); returns their bytes. Frames freed
    /// before they were written on the current connection (the peer got them on one that is
    /// closing) are not written there.
    private mutating func drop(through count: UInt64) -> Int {
        guard count > acknowledged else { return 0 }
        let dropped = Int(min(count - acknowledged, UInt64(tail.count)))
        acknowledged += UInt64(dropped)
        written = max(0, written - dropped)
        return popFirst(dropped)
    }

    /// What ``wait(_:)`` decided.
    enum Wait: Equatable {
        /// Do not wait: record again now (there is room, or the session ended).
        case now
        /// Wait: the waiter is resumed when an acknowledgement frees room, or the session ends.
        case waiting
    }

    /// Leaves `waiter` to be resumed when the tail has room again.
    mutating func wait(_ waiter: Waiter) -> Wait {
        guard !isEnded, isFull else { return .now }
        waiters.append(waiter)
        return .waiting
    }

    // MARK: Inbound

    /// What ``receive(sequence:bytes:)`` decided about one of the peer's session frames.
    enum Receive: Equatable {
        /// Hand it on. Then send `peerkit.ack` with `acknowledge` now, when set, and arm the
        /// acknowledgement timer when `armTimer`.
        case deliver(acknowledge: UInt64?, armTimer: Bool)
        /// Already received (a resent frame that also arrived on a closing connection): drop it.
        case duplicate
        /// Frames are missing before it: a protocol violation (a sentence fragment).
        case gap(String)
    }

    /// The peer's session frame number `sequence`, of `bytes`, is to be handed on.
    mutating func receive(sequence: UInt64, bytes: Int) -> Receive {
        if sequence <= received { return .duplicate }
        guard sequence == received + 1 else {
            return .gap("its session frame \(sequence) came after \(received): frames are missing between them")
        }
        received = sequence
        bytesSinceAcknowledgement += bytes
        if bytesSinceAcknowledgement >= limits.acknowledgeAfterBytes, case .active = phase {
            return .deliver(acknowledge: acknowledgeNow(), armTimer: false)
        }
        if acknowledgementTimerArmed { return .deliver(acknowledge: nil, armTimer: false) }
        acknowledgementTimerArmed = true
        return .deliver(acknowledge: nil, armTimer: true)
    }

    /// The acknowledgement timer fired: the count to acknowledge, or nil when nothing is new
    /// (or the peer is not resumed: its resume says the count).
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

    /// A connection became the peer's (the session's first, one after a suspension, or one that
    /// replaced another). Returns the count to send in `peerkit.resume`, first on it; until the
    /// peer's resume arrives there, nothing is written. Nil when the session ended.
    mutating func connected() -> UInt64? {
        switch phase {
        case .ended:
            return nil
        case let .suspended(generation):
            phase = .resuming(generation: generation)
        case .resuming:
            // The window timer that runs, if any, goes on.
            break
        case .active:
            // What was written on the connection it replaces and not acknowledged is written
            // again on this one, from what the peer says it got.
            phase = .resuming(generation: 0)
        }
        written = 0
        startsConnection = false
        bytesSinceAcknowledgement = 0
        acknowledgedToPeer = received
        return received
    }

    /// The `peerkit.resume` to send with `count` (what ``connected()`` returned, or ``received``
    /// on a connection that is not the peer's): the count and both epochs.
    func resume(received count: UInt64) -> SessionFrame.Resume {
        SessionFrame.Resume(received: count, epoch: epoch, peerEpoch: peerEpoch)
    }

    /// What ``peerResumed(_:)`` asks of the driver.
    enum Resumed {
        /// Write what ``takeUnwritten()`` returns (the tail the peer did not get, then new
        /// frames). Cancel the window timer of `generation` (0: none runs).
        case resumed(generation: Int)
        /// As ``resumed(generation:)``, but the peer ended its side of the session (its resume
        /// names a new epoch) while this side went on, and the session started again: the
        /// `lostFrames` frames (`lostBytes` bytes) written to it and not acknowledged may not have
        /// arrived, and were dropped; resume `waiters`, for whom there is room now.
        case restarted(generation: Int, lostFrames: Int, lostBytes: Int, waiters: [Waiter])
        /// The peer's count is impossible (a protocol violation: a sentence fragment).
        case invalid(String)
    }

    /// ``peerResumed(_:)`` for a resume that names no epochs: it received `count` of our frames.
    mutating func peerResumed(received count: UInt64) -> Resumed {
        peerResumed(SessionFrame.Resume(received: count))
    }

    /// The peer's `peerkit.resume` arrived on the current connection: it received `resume.received`
    /// of our session frames, in the session its epochs name. A count below what it acknowledged
    /// already is no violation (an acknowledgement on the closing connection overtook it); the
    /// tail starts after the higher.
    mutating func peerResumed(_ resume: SessionFrame.Resume) -> Resumed {
        guard case let .resuming(generation) = phase else {
            return .invalid("it sent peerkit.resume again on a connection that had resumed")
        }
        var count = resume.received
        var restart: (frames: Int, bytes: Int, waiters: [Waiter])?
        if let theirs = resume.epoch {
            if let known = peerEpoch, known != theirs { restart = restartWithNewPeerEpoch() }
            peerEpoch = theirs
            // Its count is about the session of our epoch it names; of this one it received nothing.
            if resume.peerEpoch != epoch { count = 0 }
        }
        guard count <= sent else {
            return .invalid("it resumed having received \(count) session frames, but only \(sent) were sent to it")
        }
        _ = drop(through: count)
        phase = .active
        written = 0
        startsConnection = true
        if let restart {
            return .restarted(generation: generation, lostFrames: restart.frames, lostBytes: restart.bytes, waiters: restart.waiters)
        }
        return .resumed(generation: generation)
    }

    /// The peer ended its side of the session while this side went on: both directions start
    /// again from 0. The frames ever written and not acknowledged are dropped (the peer may have
    /// taken some before it ended its side; sending them again could deliver them twice); those
    /// never written anywhere are kept, and numbered from 1. Returns what was dropped and, when
    /// that made room, the waiters to resume.
    private mutating func restartWithNewPeerEpoch() -> (frames: Int, bytes: Int, waiters: [Waiter]) {
        let doubtful = Int(min(UInt64(tail.count), highestWritten > acknowledged ? highestWritten - acknowledged : 0))
        let bytes = popFirst(doubtful)
        sent = UInt64(tail.count)
        acknowledged = 0
        highestWritten = 0
        written = 0
        received = 0
        acknowledgedToPeer = 0
        bytesSinceAcknowledgement = 0
        let resumable = bytes > 0 ? waiters : []
        if bytes > 0 { waiters = [] }
        return (doubtful, bytes, resumable)
    }

    /// What ``suspend()`` asks of the driver.
    enum Suspend: Equatable {
        /// Arm the resume window's timer for `generation`; the peer counts as suspended.
        case armWindowTimer(generation: Int)
        /// The window already runs (a connection died before the peer resumed on it), or the
        /// session ended: nothing to do.
        case none
    }

    /// The connection in use died (timed out, reset): keep everything for the resume window.
    mutating func suspend() -> Suspend {
        switch phase {
        case .ended, .suspended:
            return .none
        case let .resuming(generation) where generation > 0:
            phase = .suspended(generation: generation)
            return .none
        case .active, .resuming:
            generation += 1
            written = 0
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
        written = 0
        unacknowledgedBytes = 0
        share?.removed(chargedBytes)
        defer { waiters = [] }
        return waiters
    }
}

extension PeerSession: Sendable where Waiter: Sendable {}
extension PeerSession.Acknowledged: Sendable where Waiter: Sendable {}
extension PeerSession.Writes: Sendable {}
extension PeerSession.Resumed: Equatable where Waiter: Equatable {}
extension PeerSession.Resumed: Sendable where Waiter: Sendable {}
