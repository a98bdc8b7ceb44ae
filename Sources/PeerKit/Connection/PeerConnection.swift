import DequeModule
import NIOConcurrencyHelpers
import NIOCore

/// A handle on one TCP connection to a peer, safe to use from any thread.
///
/// **Outbound.** Frames to send wait in an outbox and are written on the channel's event loop in
/// batches: the first frame queued in a tick schedules one drain, which writes and flushes once.
/// Data frames move to the channel only while it is writable, so a backlog waits here rather than
/// in the socket's buffers, and urgent frames (our pings, and the answer to the peer's latest ping
/// while the channel is writable, see ``sendPong(_:)``) overtake it. Resource chunks
/// (``sendBulk(_:data:)``) come last: one is written only when no other frame waits, and each sender
/// may have only one chunk waiting, so a message queued during a large transfer waits for at most
/// the one chunk being written. ``waitUntilWritable()``
/// lets senders wait while the outbox is over its high-water mark; the connection's state machine
/// disconnects a peer whose outbox stays over ``PeerConfiguration/maximumQueuedOutboundBytes``.
/// The outbox counts what its frames cost in memory, not only their bytes
/// (``queuedCost(of:)``), and adds that of the frames made for this peer alone to the
/// transceiver's ``OutboundBudget`` (a broadcast's frame is one buffer shared by every peer's
/// outbox: it does not multiply the memory, so it is not charged; a resumable session's frames are
/// charged by the session, which keeps them until they are acknowledged).
///
/// **Inbound.** Messages handed to the dispatcher are counted (``inboundAccepted(_:messages:)``) until
/// their handlers ran (``inboundHandled(_:)``); over ``PeerConfiguration/maximumQueuedInboundBytes``
/// the handler stops reading from the socket, and reading resumes once half of that is handled.
///
/// **Closing.** The connection's life belongs to its ``ConnectionStateMachine`` in
/// ``PeerConnectionHandler``; ``requestClose(_:)`` asks it, from any thread, to close.
final class PeerConnection: Sendable, CustomStringConvertible {
    /// Who dialled.
    let direction: TieBreak.Direction
    /// The channel.
    let channel: any Channel
    /// The discovery key this connection was dialled for (outbound only).
    let serviceKey: String?
    /// `host:port` of the remote end, for messages.
    let remoteDescription: String
    /// Over this many bytes of unhandled inbound messages, reading pauses.
    let maximumQueuedInboundBytes: Int
    /// Where the send queue's depth and the bytes written are counted.
    let metrics: PeerMetrics
    /// Times the deadline for closing.
    let clock: PeerClock

    /// Above this many queued bytes, ``waitUntilWritable()`` waits…
    static let outboxHighWatermark = 1 << 20
    /// …until the outbox is down to this many.
    static let outboxLowWatermark = 1 << 18

    /// What a queued frame costs beyond its bytes: its buffer's object and the allocator's
    /// rounding, and its slot in the queue. Small frames cost far more than their bytes: one
    /// client that read none of its small error replies held about 90 MB for a 32 MiB limit
    /// counted in bytes. The same 256 bytes as a received message's
    /// (``PeerConnectionHandler/perMessageOverhead``).
    static let perFrameOverhead = 256

    /// What `frame` counts against the outbox's limit and the transceiver's budget while it waits.
    static func queuedCost(of frame: ByteBuffer) -> Int {
        frame.readableBytes + perFrameOverhead
    }

    /// Asks the connection's handler to do something on its event loop
    /// (sent with `triggerUserOutboundEvent`).
    enum Request: Sendable {
        /// Close for this reason (``ConnectionStateMachine/CloseReason/stopped``, `.duplicate`,
        /// `.refused`, or `.failed` for a peer the layer above found misbehaving).
        case close(ConnectionStateMachine.CloseReason)
        /// Close as the tie-break's loser (``ConnectionStateMachine/CloseReason/duplicate``);
        /// `peerLostIt`: see ``ConnectionStateMachine/closeRequested(_:now:peerLostIt:)``.
        case retire(peerLostIt: Bool)
        /// The inbound backlog is handled: read again.
        case resumeReading
        /// The layer above found the peer breaking the protocol: fail the connection with this
        /// reason (a sentence fragment), sending it as `peerkit.error`.
        case fail(String)
    }

    private struct State {
        /// The frames to write, each with whether it is charged to the ``OutboundBudget``. A
        /// `Deque`, whose `popFirst()` moves the frame out (`CircularBuffer`'s copies it and
        /// then clears its slot: a retain and a release of every frame written).
        var queued = Deque<(frame: ByteBuffer, charged: Bool)>()
        /// What the queued frames cost (``PeerConnection/queuedCost(of:)``): their bytes and a
        /// per-frame overhead.
        var queuedBytes = 0
        /// What of that is charged to the budget: the frames made for this peer alone.
        var chargedBytes = 0
        /// The budget's share of the peer's session, when this connection carries it.
        var sessionShare: OutboundBudget.Share?
        var urgent: [ByteBuffer] = []
        /// The answer to the peer's latest ping, until the channel can take it (see ``sendPong(_:)``).
        var pong: ByteBuffer?
        /// Resource chunks: written only when nothing else waits; at most one at a time. A chunk
        /// is its frame's head and its data, written one after the other (the data is not
        /// copied behind the head).
        var bulk: (head: ByteBuffer, data: ByteBuffer?)?
        var bulkWaiters: [CheckedContinuation<Void, Never>] = []
        var drainScheduled = false
        /// The peer's hello: the one place it is kept.
        var remote: Hello? {
            didSet {
                peer = Self.peer(remote, fingerprint: fingerprint)
                offersResumableSession = remote?.resumableSession != nil
            }
        }
        /// Certificates mode: the SHA-256 fingerprint of the peer's verified public key.
        var fingerprint: String? {
            didSet { peer = Self.peer(remote, fingerprint: fingerprint) }
        }
        /// The peer made from ``remote`` and ``fingerprint``, kept with them: it is asked for
        /// with every frame received.
        private(set) var peer: Peer?
        /// Whether ``remote`` offers a resumable session, kept with it for the same reason.
        private(set) var offersResumableSession = false

        private static func peer(_ hello: Hello?, fingerprint: String?) -> Peer? {
            hello.map { Peer(id: $0.peerID, name: $0.name, discoveryInfo: $0.discoveryInfo ?? [:], isConnected: true, fingerprint: fingerprint) }
        }
        var closed = false
        /// Cleared when the connection starts closing: from then on frames are refused (the
        /// connection manager already routes the peer's frames elsewhere).
        var accepting = true
        /// Why the connection ended, once it did.
        var closeError: PeerKitError?
        /// Senders waiting for the outbox to drain, by ticket.
        var writabilityWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiterTicket = 0
        var inboundBytes = 0
        var readingPaused = false
        /// Paused (also) because the transceiver's ``InboundBudget`` was spent.
        var pausedByBudget = false
        /// Nothing arrived for a heartbeat interval, as of the last heartbeat tick.
        var quiet = false
        /// When the handshake completed and the peer was admitted (``markEstablished(at:)``).
        var establishedAt: NIODeadline?
    }

    private let state = NIOLockedValueBox(State())

    /// Over this many queued bytes the outbox is full: frames that cannot wait are refused, and
    /// the peer's handlers wait (``PeerConfiguration/maximumQueuedOutboundBytes``).
    let maximumQueuedOutboundBytes: Int
    /// Called (on the event loop) when the outbox drops below ``maximumQueuedOutboundBytes``
    /// after it was full: the dispatcher runs the peer's handlers again.
    private let roomAvailable: (@Sendable () -> Void)?

    /// What all of the transceiver's connections may hold unhandled together (nil: no such bound).
    let inboundBudget: InboundBudget?
    /// What all of the transceiver's connections may hold queued to send together (nil: no such
    /// bound). While it is spent, ``roomAvailable`` is also called when nothing charged to it is
    /// left in this outbox, and when the total drops below the budget.
    let outboundBudget: OutboundBudget?

    init(channel: any Channel, direction: TieBreak.Direction, serviceKey: String?, maximumQueuedInboundBytes: Int = 4 << 20, inboundBudget: InboundBudget? = nil, maximumQueuedOutboundBytes: Int = 32 << 20, outboundBudget: OutboundBudget? = nil, metrics: PeerMetrics = .disabled, clock: PeerClock = .continuous, roomAvailable: (@Sendable () -> Void)? = nil) {
        self.inboundBudget = inboundBudget
        self.outboundBudget = outboundBudget
        self.maximumQueuedOutboundBytes = maximumQueuedOutboundBytes
        self.roomAvailable = roomAvailable
        self.metrics = metrics
        self.channel = channel
        self.clock = clock
        self.direction = direction
        self.serviceKey = serviceKey
        self.maximumQueuedInboundBytes = maximumQueuedInboundBytes
        self.remoteDescription = channel.remoteAddress.map(PeerConnection.describe) ?? "an unknown address"
    }

    /// Whether nothing arrived for a heartbeat interval, as of the connection's last heartbeat
    /// check (at most a heartbeat interval ago: ``ConnectionStateMachine/nextHeartbeat(now:)``):
    /// the link may be gone. A new connection from the same peer then wins the tie-break
    /// (``TieBreak``), as it does beside any connection that old.
    var isQuiet: Bool { state.withLockedValue { $0.quiet } }

    /// Records the heartbeat's view of the connection's silence (on the event loop, when it changes).
    func setQuiet(_ quiet: Bool) {
        state.withLockedValue { $0.quiet = quiet }
    }

    /// When the connection's handshake completed and its peer was admitted, on the transceiver's
    /// clock; nil before. A tie-break presumes an existing connection lost when a new one comes a
    /// heartbeat interval or more after it (``TieBreak``).
    var establishedAt: NIODeadline? { state.withLockedValue { $0.establishedAt } }

    /// Records when the connection's peer was admitted (``establishedAt``).
    func markEstablished(at now: NIODeadline) {
        state.withLockedValue { $0.establishedAt = now }
    }

    /// The peer's hello, once the handshake completed.
    var remote: Hello? { state.withLockedValue { $0.remote } }

    /// The peer at the other end, once the handshake completed (made from its hello and, in
    /// certificates mode, its verified fingerprint).
    var peer: Peer? { state.withLockedValue { $0.peer } }

    /// Whether the peer's hello offers a resumable session (feature resume, with its session
    /// id): asked for with every frame received, so it does not copy the hello.
    var offersResumableSession: Bool { state.withLockedValue { $0.offersResumableSession } }

    /// What waits in the outbox: its frames' bytes and a per-frame overhead (``queuedCost(of:)``).
    var queuedOutboundBytes: Int { state.withLockedValue { $0.queuedBytes } }

    /// What of ``queuedOutboundBytes`` is charged to the transceiver's ``OutboundBudget``: the
    /// frames made for this peer alone, not the broadcasts it shares with the others, nor a
    /// session's frames (its tail charges those).
    var chargedOutboundBytes: Int { state.withLockedValue { $0.chargedBytes } }

    /// What the peer holds of the transceiver's ``OutboundBudget`` through this connection: what
    /// its outbox has charged, and what the session it carries keeps charged in its tail, written
    /// and not acknowledged (``setSessionShare(_:)``). The heartbeat disconnects a peer that holds
    /// too much of a spent budget for too long.
    var heldOfOutboundBudget: Int {
        let (charged, share) = state.withLockedValue { ($0.chargedBytes, $0.sessionShare) }
        return charged + (share?.bytes ?? 0)
    }

    /// This connection became the one that carries the peer's resumable session, which keeps
    /// `share` of the budget: ``heldOfOutboundBudget`` counts it from now on.
    func setSessionShare(_ share: OutboundBudget.Share?) {
        state.withLockedValue { $0.sessionShare = share }
    }

    /// Why the connection ended, once it ended badly.
    var closeError: PeerKitError? {
        // `description` takes the lock itself: read the state first, describe after.
        let (closed, error) = state.withLockedValue { ($0.closed, $0.closeError) }
        guard closed else { return nil }
        return error ?? .connectionClosed(peer: description)
    }

    /// Whether the connection ended.
    var isClosed: Bool { state.withLockedValue { $0.closed } }

    /// Asks the handler to fail the connection: the peer broke the protocol (`reason` is a
    /// sentence fragment sent to it in `peerkit.error`). Safe from any thread.
    func fail(_ reason: String) {
        channel.triggerUserOutboundEvent(Request.fail(reason), promise: nil)
    }

    /// Whether reading is paused because this peer's messages wait for their handlers.
    var isReadingPaused: Bool { state.withLockedValue { $0.readingPaused } }

    /// ``queuedOutboundBytes`` and ``isReadingPaused`` under one lock: what every heartbeat tick
    /// reads, for every connection.
    var heartbeatFigures: (queuedOutboundBytes: Int, readingPaused: Bool) {
        state.withLockedValue { ($0.queuedBytes, $0.readingPaused) }
    }

    /// Records the peer's hello once the handshake completed and, in certificates mode, its
    /// verified public-key fingerprint.
    func setRemote(_ hello: Hello, fingerprint: String? = nil) {
        state.withLockedValue {
            $0.remote = hello
            $0.fingerprint = fingerprint
        }
    }

    /// Records the peer's new name; returns its hello as it now is (nil before the handshake).
    func rename(to name: String) -> Hello? {
        state.withLockedValue { state in
            state.remote?.name = name
            return state.remote
        }
    }

    /// Whether the peer's hello listed the optional protocol `feature`.
    func supports(_ feature: String) -> Bool {
        remote?.supports(feature) ?? false
    }

    var description: String {
        if let remote { return "\"\(LogSafe.text(remote.name, maximumBytes: 80))\" at \(remoteDescription)" }
        return remoteDescription
    }

    /// Asks the handler to close the connection for `reason`; safe from any thread.
    func requestClose(_ reason: ConnectionStateMachine.CloseReason) {
        channel.triggerUserOutboundEvent(Request.close(reason), promise: nil)
    }

    /// Closes this connection as the tie-break's loser; `peerLostIt`: the peer dialled the
    /// winner because it lost this one (see ``ConnectionStateMachine/closeRequested(_:now:peerLostIt:)``).
    func retire(peerLostIt: Bool) {
        channel.triggerUserOutboundEvent(Request.retire(peerLostIt: peerLostIt), promise: nil)
    }

    // MARK: Sending

    /// What ``enqueue(_:below:shared:)`` did with a frame.
    enum Enqueued: Equatable {
        /// It waits in the outbox.
        case queued
        /// The outbox holds `queuedBytes`, at or over the mark given: not queued.
        case full(queuedBytes: Int)
        /// The connection is closing or closed: not queued (the peer's frames go elsewhere now).
        case closed

        var isQueued: Bool { self == .queued }
    }

    /// Queues a complete frame for writing, unless the outbox already holds `mark` bytes or more
    /// (nil: whatever it holds), or the connection is closing. The check and the queueing are one
    /// step, so concurrent senders cannot all pass the mark: the outbox stays within the mark
    /// plus one frame. A `shared` frame (a broadcast's, the same buffer in every peer's outbox)
    /// is not charged to the transceiver's budget.
    func enqueue(_ frame: ByteBuffer, below mark: Int?, shared: Bool = false) -> Enqueued {
        let (outcome, appended) = state.withLockedValue { state -> (Enqueued, Appended) in
            guard !state.closed, state.accepting else { return (.closed, Appended()) }
            if let mark, state.queuedBytes >= mark { return (.full(queuedBytes: state.queuedBytes), Appended()) }
            return (.queued, append(CollectionOfOne(frame), charged: !shared, to: &state))
        }
        finishAppend(appended)
        return outcome
    }

    /// What ``appendInOrder(_:)`` queued: its cost (``queuedCost(of:)``), what of it
    /// is charged to the budget, and whether the drain is to be scheduled.
    struct Appended {
        var bytes = 0
        var charged = 0
        var scheduleDrain = false
    }

    /// Appends `frames` to the outbox, in order, without scheduling the drain or updating the
    /// metrics: for a caller that decides the order of frames under a lock of its own (a
    /// session's numbering, which the wire order must follow) and so appends under it. It calls
    /// ``finishAppend(_:)`` once its lock is released. This connection's lock is a leaf (nothing
    /// is called while it is held but the ``InboundBudget``'s lock, itself a leaf), so taking it
    /// under another cannot deadlock. Appends nothing
    /// once the connection is closing or closed; unlike ``enqueue(_:below:shared:)`` there is no mark:
    /// the caller bounds what it keeps (a session, by ``PeerConfiguration/maximumUnacknowledgedBytes``).
    /// The frames are not charged to the transceiver's budget here: the session that keeps them
    /// charges them for as long as it does (``OutboundBudget/Share``), written or not.
    func appendInOrder(_ frames: some Collection<ByteBuffer>) -> Appended {
        state.withLockedValue { state -> Appended in
            guard !state.closed, state.accepting else { return Appended() }
            return append(frames, charged: false, to: &state)
        }
    }

    /// Appends `frames` to the outbox of `state` (the lock held), and, when they are `charged`
    /// (made for this peer alone, and kept by no session), their cost to the budget; the drain is
    /// to be scheduled when none is yet. The budget's count is one atomic add, made under the lock
    /// so that no drain can take the frames off it before they are on it.
    private func append(_ frames: some Collection<ByteBuffer>, charged: Bool, to state: inout State) -> Appended {
        guard !frames.isEmpty else { return Appended() }
        var appended = Appended()
        for frame in frames {
            let cost = Self.queuedCost(of: frame)
            state.queued.append((frame, charged))
            appended.bytes += cost
        }
        if charged { appended.charged = appended.bytes }
        state.queuedBytes += appended.bytes
        state.chargedBytes += appended.charged
        if appended.charged > 0 { outboundBudget?.added(appended.charged) }
        if !state.drainScheduled {
            state.drainScheduled = true
            appended.scheduleDrain = true
        }
        return appended
    }

    /// Completes an ``appendInOrder(_:)``: counts its bytes and schedules the drain. Call with
    /// no lock held.
    func finishAppend(_ appended: Appended) {
        if appended.bytes > 0 { metrics.sendQueueBytes.increment(by: Double(appended.bytes)) }
        if appended.scheduleDrain {
            channel.eventLoop.execute { self.drain() }
        }
    }

    /// Queues a frame of this connection's own protocol (a heartbeat, a group update, a resource
    /// control frame); an `urgent` one (our ping) goes before any data still in the outbox. A pong
    /// goes through ``sendPong(_:)``.
    /// Returns false when the connection is closing or closed (the frame is not sent).
    @discardableResult
    func send(_ frame: ByteBuffer, urgent: Bool = false) -> Bool {
        guard urgent else { return enqueue(frame, below: nil).isQueued }
        return queueAhead { $0.urgent.append(frame) }
    }

    /// Queues the answer to a ping of the peer. It goes before any data still in the outbox, as
    /// a ping does, but only while the channel is writable, and only the latest waits: a pong
    /// answers the pings before it too (any bytes prove us alive), so one is enough. The pings
    /// are the peer's to send, as many as it likes: answering each while it does not read ours
    /// held one pong per ping, without bound (a peer sending pings as fast as it could with its
    /// reading side stalled grew a `peerkit node` by 1.8 GB in 20 s). Nothing is queued once the
    /// connection is closing or closed.
    func sendPong(_ frame: ByteBuffer) {
        _ = queueAhead { $0.pong = frame }
    }

    /// Puts a frame that goes before the outbox's data in place with `place` and schedules the
    /// drain when none is; false (and nothing placed) once the connection is closing or closed.
    private func queueAhead(_ place: (inout State) -> Void) -> Bool {
        let (queued, scheduleDrain) = state.withLockedValue { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            place(&state)
            if state.drainScheduled { return (true, false) }
            state.drainScheduled = true
            return (true, true)
        }
        if scheduleDrain {
            channel.eventLoop.execute { self.drain() }
        }
        return queued
    }

    /// Queues a frame of a resource transfer (a chunk, or the end that must follow the chunks),
    /// first waiting until the one queued before it (by any
    /// transfer on this connection) has been written. Chunks go out only when no other frame
    /// waits, so pings, control frames and messages overtake them.
    /// - Throws: why the connection ended, when it ends before (or while) waiting.
    ///
    /// `frame` is the whole frame, or, with `data`, its beginning: `data` is written right after
    /// it, as the rest of the frame.
    func sendBulk(_ frame: ByteBuffer, data: ByteBuffer? = nil) async throws(PeerKitError) {
        while true {
            let outcome = state.withLockedValue { state -> (queued: Bool, scheduleDrain: Bool) in
                guard !state.closed, state.bulk == nil else { return (false, false) }
                state.bulk = (frame, data)
                if state.drainScheduled { return (true, false) }
                state.drainScheduled = true
                return (true, true)
            }
            if outcome.scheduleDrain { channel.eventLoop.execute { self.drain() } }
            if outcome.queued { return }
            if let error = closeError { throw error }
            await withCheckedContinuation { continuation in
                let waiting = state.withLockedValue { state -> Bool in
                    guard state.bulk != nil, !state.closed else { return false }
                    state.bulkWaiters.append(continuation)
                    return true
                }
                if !waiting { continuation.resume() }
            }
        }
    }

    /// Returns once the outbox has drained to its low-water mark (at once when it is below its
    /// high-water mark), so that a fast sender does not queue without bound. A peer that does not
    /// read for `grace` meanwhile is too slow: the connection is failed and this throws
    /// ``PeerKitError/peerTooSlow(peer:queuedBytes:limit:grace:)``.
    /// - Throws: that, or why the connection ended, when it ends before (or while) waiting.
    func waitForRoom(grace: TimeAmount, limit: Int) async throws(PeerKitError) {
        let mustWait = state.withLockedValue { $0.queuedBytes >= Self.outboxHighWatermark && !$0.closed }
        if mustWait {
            let ticket = state.withLockedValue { state -> Int in
                defer { state.nextWaiterTicket += 1 }
                return state.nextWaiterTicket
            }
            let timer = clock.schedule(on: channel.eventLoop, in: .nanoseconds(grace.nanoseconds)) {
                self.roomWaitExpired(ticket: ticket, grace: grace, limit: limit)
            }
            await withCheckedContinuation { continuation in
                let waiting = state.withLockedValue { state -> Bool in
                    guard state.queuedBytes >= Self.outboxHighWatermark, !state.closed else { return false }
                    state.writabilityWaiters[ticket] = continuation
                    return true
                }
                if !waiting { continuation.resume() }
            }
            timer.cancel()
        }
        if let error = closeError {
            throw error
        }
    }

    /// A sender waited `grace` for the peer to read: the peer is too slow. Fails the connection
    /// (its waiters then throw why) unless that sender was released meanwhile.
    private func roomWaitExpired(ticket: Int, grace: TimeAmount, limit: Int) {
        let queued = state.withLockedValue { state -> Int? in
            guard state.writabilityWaiters[ticket] != nil else { return nil }
            return state.queuedBytes
        }
        guard let queued else { return }
        requestClose(.failed(.tooSlow(queuedBytes: queued, limit: limit, grace: grace)))
    }

    /// Called by the handler on the event loop when the channel's writability changes.
    func writabilityChanged(isWritable: Bool) {
        if isWritable { drain() }
    }

    /// Called by the handler when the connection ends (with `error` saying why, when it was not
    /// orderly): drops the outbox and releases every waiting sender.
    func ended(error: PeerKitError?) {
        let (waiters, dropped) = state.withLockedValue { state -> ([CheckedContinuation<Void, Never>], Released) in
            if !state.closed { state.closeError = error }
            state.closed = true
            let dropped = Released(bytes: state.queuedBytes, charged: state.chargedBytes)
            state.queued.removeAll()
            state.queuedBytes = 0
            state.chargedBytes = 0
            state.urgent.removeAll()
            state.pong = nil
            state.bulk = nil
            defer {
                state.writabilityWaiters = [:]
                state.bulkWaiters = []
            }
            return (Array(state.writabilityWaiters.values) + state.bulkWaiters, dropped)
        }
        outboundReleased(dropped)
        inboundBudget?.forget(self)
        for waiter in waiters { waiter.resume() }
    }

    /// What left the outbox (written or dropped): its cost, and what of it was charged to the budget.
    private struct Released {
        var bytes = 0
        var charged = 0
    }

    /// `released` left the outbox: the metrics and the budget count it no longer. When that
    /// brings the transceiver's budget below its limit, the peers held back for it are served
    /// again.
    private func outboundReleased(_ released: Released) {
        if released.bytes > 0 { metrics.sendQueueBytes.decrement(by: Double(released.bytes)) }
        if released.charged > 0, outboundBudget?.removed(released.charged) == true { roomAvailable?() }
    }

    /// Writes urgent frames, then data frames while the channel is writable (every one when
    /// `everything`), and flushes once. Runs on the event loop. Small frames of one drain go
    /// through the pipeline as one buffer (``OutboundBatch``): the channel's writability, read
    /// before each frame, then lags by at most one batch (``OutboundBatch/capacity``).
    func drain(everything: Bool = false) {
        let wasFull = queuedOutboundBytes >= maximumQueuedOutboundBytes
        var wrote = false
        var wroteBytes = 0
        var dequeued = Released()
        defer {
            // Room for this peer's handlers: under its own limit again, or, while the
            // transceiver's budget is spent (they then run only while nothing charged to it
            // waits for this peer), with nothing charged left.
            if let roomAvailable, wasFull || (dequeued.charged > 0 && outboundBudget?.isSpent == true) {
                let (queued, charged) = state.withLockedValue { ($0.queuedBytes, $0.chargedBytes) }
                if queued < maximumQueuedOutboundBytes, wasFull || charged == 0 { roomAvailable() }
            }
        }
        var released: [CheckedContinuation<Void, Never>] = []
        var frames = 0
        var more = false
        var batch = OutboundBatch()
        while true {
            // Read before the lock, which stays a leaf; each write below may change it.
            let writable = everything || channel.isWritable
            // A frame to write, the data that follows it (a resource chunk's), and the bytes of
            // the data frames still queued (what may join the frame in its batch).
            let next = state.withLockedValue { state -> (ByteBuffer, ByteBuffer?, Int)? in
                if !state.urgent.isEmpty { return (state.urgent.removeFirst(), nil, 0) }
                if writable, let pong = state.pong {
                    state.pong = nil
                    return (pong, nil, 0)
                }
                if !everything, frames >= Self.framesPerDrain, !state.queued.isEmpty {
                    // Enough for one turn: the rest goes in a later task, so that a long backlog
                    // (a broadcast to many peers) does not hold the event loop from reading and
                    // from the other connections' pings and data. drainScheduled stays set.
                    more = true
                    return nil
                }
                if state.queued.isEmpty, writable, let chunk = state.bulk {
                    state.bulk = nil
                    released += state.bulkWaiters
                    state.bulkWaiters = []
                    return (chunk.head, chunk.data, 0)
                }
                guard writable, let (frame, charged) = state.queued.popFirst() else {
                    state.drainScheduled = false
                    if state.queuedBytes <= Self.outboxLowWatermark {
                        released += state.writabilityWaiters.values
                        state.writabilityWaiters = [:]
                    }
                    return nil
                }
                let cost = Self.queuedCost(of: frame)
                state.queuedBytes -= cost
                dequeued.bytes += cost
                if charged {
                    state.chargedBytes -= cost
                    dequeued.charged += cost
                }
                frames += 1
                return (frame, nil, state.queuedBytes - state.queued.count * Self.perFrameOverhead)
            }
            guard let (frame, rest, remaining) = consume next else { break }
            wroteBytes += frame.readableBytes
            wrote = true
            if rest == nil, OutboundBatch.gathers(frame) {
                if let full = batch.add(frame, remainingBytes: remaining, allocator: channel.allocator) {
                    channel.write(full, promise: nil)
                }
                continue
            }
            if let gathered = batch.take() { channel.write(gathered, promise: nil) }
            channel.write(frame, promise: nil)
            if let rest {
                wroteBytes += rest.readableBytes
                channel.write(rest, promise: nil)
            }
        }
        if let gathered = batch.take() { channel.write(gathered, promise: nil) }
        if wrote { channel.flush() }
        outboundReleased(dequeued)
        if wroteBytes > 0 { metrics.wireBytesSent.increment(by: wroteBytes) }
        for waiter in released { waiter.resume() }
        if more { channel.eventLoop.execute { self.drain() } }
    }

    /// The most data frames one ``drain(everything:)`` writes before it lets the event loop turn.
    static let framesPerDrain = 256

    // MARK: Inbound accounting

    /// `messages` messages of `cost` bytes in all went to the dispatcher. Returns true when the
    /// backlog is now over the limit (this connection's, or the transceiver's ``InboundBudget``)
    /// and reading must pause. A message that is the only one of this connection's waiting never
    /// pauses it for the budget (``InboundBudget/accepted(_:by:alone:)``): a peer that waits for
    /// each answer keeps being read while others hold the budget.
    func inboundAccepted(_ cost: Int, messages: Int = 1) -> Bool {
        state.withLockedValue { state in
            // The budget's lock is a leaf: taking it under this one cannot deadlock.
            let alone = messages == 1 && state.inboundBytes == 0
            let overBudget = inboundBudget?.accepted(cost, by: self, alone: alone) ?? false
            state.inboundBytes += cost
            if state.inboundBytes > maximumQueuedInboundBytes || overBudget {
                state.readingPaused = true
                state.pausedByBudget = state.pausedByBudget || overBudget
            }
            return state.readingPaused
        }
    }

    /// The handler of a message of `cost` bytes finished (or the message was dropped); resumes
    /// reading once this connection's backlog is down to half its limit and the transceiver's
    /// budget allows.
    func inboundHandled(_ cost: Int) {
        let resumed = inboundBudget?.handled(cost) ?? []
        let resume = state.withLockedValue { state in
            state.inboundBytes -= cost
            return self.resumesReading(&state)
        }
        for connection in resumed { connection.budgetReleased() }
        if resume { channel.triggerUserOutboundEvent(Request.resumeReading, promise: nil) }
    }

    /// A message that arrived on this connection was dropped unhandled (its peer was refused or
    /// disconnected first): what it counted against the inbound limits counts no longer.
    func inboundDropped(_ envelope: Envelope) {
        guard PeerConnectionHandler.countsAgainstInboundLimit(envelope) else { return }
        inboundHandled(PeerConnectionHandler.cost(of: envelope))
    }

    /// The transceiver's budget has room again.
    private func budgetReleased() {
        state.withLockedValue { $0.pausedByBudget = false }
        resumeReadingIfAllowed()
    }

    private func resumeReadingIfAllowed() {
        if state.withLockedValue({ resumesReading(&$0) }) {
            channel.triggerUserOutboundEvent(Request.resumeReading, promise: nil)
        }
    }

    /// Whether reading, paused, may resume now (this connection's backlog is down to half its
    /// limit, and the budget did not pause it); marks it resumed when so. Call with the lock held.
    private func resumesReading(_ state: inout State) -> Bool {
        guard state.readingPaused, !state.pausedByBudget, state.inboundBytes <= maximumQueuedInboundBytes / 2 else { return false }
        state.readingPaused = false
        return true
    }

    // MARK: Closing (on the event loop, asked by the handler)

    /// Sends what is queued (unless `discardQueue`), then `lastFrame`, then closes as `mode` says,
    /// closing anyway after `timeout`. Runs on the event loop.
    func finish(lastFrame: ByteBuffer?, mode: ConnectionStateMachine.CloseMode, discardQueue: Bool, timeout: TimeAmount) {
        // The connection manager already routes the peer's frames elsewhere: a frame that comes
        // after this is refused (and its sender routes it again) instead of being dropped.
        state.withLockedValue { $0.accepting = false }
        if discardQueue {
            let dropped = state.withLockedValue { state -> Released in
                defer { state.queued.removeAll(); state.queuedBytes = 0; state.chargedBytes = 0; state.bulk = nil }
                return Released(bytes: state.queuedBytes, charged: state.chargedBytes)
            }
            outboundReleased(dropped)
        } else {
            drain(everything: true)
        }
        guard channel.isActive else { return }
        let channel = self.channel
        let deadline = clock.schedule(on: channel.eventLoop, in: .nanoseconds(timeout.nanoseconds)) { channel.close(promise: nil) }
        guard let lastFrame else {
            if mode == .close {
                deadline.cancel()
                channel.close(promise: nil)
            }
            return
        }
        metrics.wireBytesSent.increment(by: lastFrame.readableBytes)
        channel.writeAndFlush(lastFrame).whenComplete { _ in
            switch mode {
            case .close:
                deadline.cancel()
                channel.close(promise: nil)
            case .halfClose:
                channel.close(mode: .output, promise: nil)
            case .awaitPeer:
                break
            }
        }
    }

    private static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4:
            return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6:
            return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket:
            // A socket pair's ends (a test network's connections) have no path.
            guard let path = address.pathname, !path.isEmpty else { return "an unnamed Unix socket" }
            return path
        }
    }
}
