import NIOCore

/// The life of one peer above its connections: which connection the frames for it go to, which
/// of two connections survives when both peers dialled each other, and what waits while the peer
/// switches to that winner.
///
///     idle ──established(c)──▶ connected(c) ──closed(c)──▶ idle            (disconnected)
///                              connected(c) ──established(d)──▶ connected(winner), loser retiring
///                              connected(c) ──closed(c, bye "duplicate")──▶ switching(hold)
///     switching(hold) ──established(w)──▶ flushing(w, hold) ──held frames moved──▶ connected(w)
///     switching(hold) ──grace expired──▶ idle                              (disconnected)
///
/// Users address peers, never connections: ``route(_:limit:)`` and ``destination`` say where a
/// frame for this peer goes now. While the peer switches (its `bye` closed the connection in use
/// and the winner's handshake has not completed here yet) frames that cannot wait (broadcasts,
/// replies) are held, up to the peer's outbox limit, and senders that can wait do; when the winner
/// arrives the held frames go out on it first, in order, then the waiting senders' (``flushing``).
/// A tie-break, a switch or a retired connection is never visible to a user: the peer stays
/// connected throughout.
///
/// A value type with no I/O: the ``ConnectionManager`` keeps one per peer, changes it under its
/// lock, and performs what each event returns (retiring a connection, moving held frames,
/// resuming waiters, reporting the peer connected or disconnected) after releasing the lock.
/// `Connection` is the connection's identity (``PeerConnection`` in the manager, a plain object in
/// tests); `Waiter` is whatever a sender leaves to be resumed when the switch ends.
struct PeerStateMachine<Connection: AnyObject, Waiter> {
    /// A connection that completed its handshake, and who dialled it.
    struct Link {
        let connection: Connection
        let direction: TieBreak.Direction
    }

    /// Frames sent while the peer switches connections, oldest first, and what they are charged
    /// to the transceiver's ``OutboundBudget``: each frame from the moment it is held until it is
    /// taken out for the winner (``takeHeldFrames(for:)``). The charge lives in a share that the
    /// hold carries, so a hold that is dropped (the winner never came, the peer was abandoned or
    /// the transceiver stopped) gives back what it held when it goes, whichever way it went.
    struct Hold {
        fileprivate(set) var frames = CircularBuffer<ByteBuffer>()
        fileprivate(set) var bytes = 0
        /// Nil where no budget applies (the state machine's tests).
        let charge: OutboundBudget.Share?

        init(charge: OutboundBudget.Share? = nil) {
            self.charge = charge
        }

        fileprivate mutating func append(_ frame: ByteBuffer) {
            frames.append(frame)
            bytes += frame.readableBytes
            charge?.added(frame.readableBytes)
        }

        /// Takes every frame out (for the winner): they are charged no longer.
        fileprivate mutating func takeAll() -> CircularBuffer<ByteBuffer> {
            defer {
                charge?.removed(bytes)
                frames = []
                bytes = 0
            }
            return frames
        }
    }

    enum State {
        /// No connection completed its handshake (or the last one ended).
        case idle
        /// Frames go to this connection.
        case connected(Link)
        /// The connection in use was closed by the peer's `bye` after a tie-break; its winner is
        /// on its way. `generation` tells this switch's grace timer from an earlier one's.
        case switching(Hold, generation: Int)
        /// The winner arrived: frames held meanwhile are being moved to it; frames sent now join
        /// the hold, behind them, so that nothing overtakes them.
        case flushing(Link, Hold)
    }

    private(set) var state: State = .idle
    /// Connections that lost a tie-break and are closing: the peer may still be writing on them.
    private(set) var retiring: [Connection] = []
    /// Senders waiting for the switch to end (or for room in its hold).
    private var waiters: [Waiter] = []
    private var generation = 0

    init() {}

    /// The connection frames go to now, if any (also while held frames move to it).
    var current: Connection? {
        switch state {
        case let .connected(link), let .flushing(link, _): return link.connection
        case .idle, .switching: return nil
        }
    }

    /// Whether the peer counts as connected: it has a connection, or is switching to a winner.
    var isConnected: Bool {
        if case .idle = state { return false }
        return true
    }

    /// Whether the peer is between two connections (no connection to write on).
    var isSwitching: Bool {
        if case .switching = state { return true }
        return false
    }

    /// Bytes held for the winner.
    var heldBytes: Int {
        switch state {
        case let .switching(hold, _), let .flushing(_, hold): return hold.bytes
        case .idle, .connected: return 0
        }
    }

    /// How many senders wait for the switch to end.
    var waiterCount: Int { waiters.count }

    // MARK: Connections

    /// What ``established(_:direction:localPeerID:remotePeerID:)`` asks of the manager.
    enum Established {
        /// The peer is connected now: report it.
        case connected
        /// A second connection: close `loser` as the tie-break's loser (`bye` "duplicate"). The
        /// peer stays connected, on the winner. `peerLostIt`: the loser is the existing connection
        /// and lost because it was presumed lost, not by the plain rule (see
        /// ``ConnectionStateMachine/closeRequested(_:now:peerLostIt:)``).
        case retire(Connection, peerLostIt: Bool)
        /// The winner of a switch arrived: move the held frames to it (``takeHeldFrames(for:)``),
        /// cancel the grace timer of `generation`, and resume `waiters`. The peer was connected
        /// all along: report nothing.
        case switched(waiters: [Waiter], generation: Int)
    }

    /// `connection` completed its handshake and its peer was admitted. `presumedLost` says whether
    /// an existing connection is presumed lost, so that the new one replaces it whoever dialled
    /// either (``TieBreak/presumedLost(quiet:establishedAt:now:heartbeatInterval:)``).
    mutating func established(_ connection: Connection, direction: TieBreak.Direction, localPeerID: String, remotePeerID: String, presumedLost: (Connection) -> Bool = { _ in false }) -> Established {
        let link = Link(connection: connection, direction: direction)
        switch state {
        case .idle:
            state = .connected(link)
            return .connected
        case let .connected(existing):
            let lost = presumedLost(existing.connection)
            let newWins = TieBreak.newConnectionWins(existing: existing.direction, new: direction, localPeerID: localPeerID, remotePeerID: remotePeerID, existingPresumedLost: lost)
            let loser = newWins ? existing.connection : connection
            if newWins { state = .connected(link) }
            retiring.append(loser)
            return .retire(loser, peerLostIt: lost)
        case let .flushing(existing, hold):
            // A third connection while the winner takes over: the same rule; what is still held
            // goes to whichever survives.
            let lost = presumedLost(existing.connection)
            let newWins = TieBreak.newConnectionWins(existing: existing.direction, new: direction, localPeerID: localPeerID, remotePeerID: remotePeerID, existingPresumedLost: lost)
            let loser = newWins ? existing.connection : connection
            if newWins { state = .flushing(link, hold) }
            retiring.append(loser)
            return .retire(loser, peerLostIt: lost)
        case let .switching(hold, generation):
            state = .flushing(link, hold)
            defer { waiters = [] }
            return .switched(waiters: waiters, generation: generation)
        }
    }

    /// Takes the frames held for `winner`, to be written on it in order. Returns an empty array
    /// (and the peer is then simply connected to `winner`) once nothing is held; call again
    /// after writing what it returned, since frames sent meanwhile joined the hold. Also returns
    /// the senders that waited for room in the hold.
    mutating func takeHeldFrames(for winner: Connection) -> (frames: CircularBuffer<ByteBuffer>, waiters: [Waiter]) {
        guard case let .flushing(link, hold) = state, link.connection === winner else { return ([], []) }
        if hold.frames.isEmpty {
            state = .connected(link)
            defer { waiters = [] }
            return ([], waiters)
        }
        var taken = hold
        state = .flushing(link, Hold(charge: hold.charge))
        return (taken.takeAll(), [])
    }

    /// What ``closed(_:byeDuplicate:)`` asks of the manager.
    enum Closed: Equatable {
        /// Not this peer's current connection (a retired loser, or one never used): nothing
        /// changes for the peer.
        case ignored
        /// The peer switches to the winner: arm the grace timer for `generation` (at most
        /// the handshake timeout); the peer stays connected meanwhile.
        case switching(generation: Int)
        /// The peer is disconnected: report it; what was held for it is dropped.
        case disconnected
    }

    /// `connection` ended. `byeDuplicate`: the peer closed it with `bye` "duplicate connection",
    /// because it keeps another connection to us (the tie-break's winner, on its way).
    ///
    /// `charge` makes the hold's share of the budget (see ``Hold``) when a switch starts.
    mutating func closed(_ connection: Connection, byeDuplicate: Bool, charge: () -> OutboundBudget.Share? = { nil }) -> Closed {
        // A retired loser's close starts with its bye; it stays in `retiring` until its socket
        // has closed (``finished(_:)``), since the peer may still be writing on it.
        if retiring.contains(where: { $0 === connection }) { return .ignored }
        switch state {
        case let .connected(link) where link.connection === connection:
            guard byeDuplicate else {
                state = .idle
                return .disconnected
            }
            generation += 1
            state = .switching(Hold(charge: charge()), generation: generation)
            return .switching(generation: generation)
        case let .flushing(link, hold) where link.connection === connection:
            guard byeDuplicate else {
                state = .idle
                return .disconnected
            }
            generation += 1
            state = .switching(hold, generation: generation)
            return .switching(generation: generation)
        case .idle, .connected, .flushing, .switching:
            return .ignored
        }
    }

    /// A tie-break's loser finished closing: nothing more can arrive on it. Returns true when it
    /// was the last loser, so that messages held on the winner can be handled now.
    mutating func finished(_ connection: Connection) -> Bool {
        guard let index = retiring.firstIndex(where: { $0 === connection }) else { return false }
        retiring.remove(at: index)
        return retiring.isEmpty
    }

    /// The switch of `generation` waited its grace period and no winner came. Returns the
    /// waiters to resume (the peer is then disconnected), or nil when that switch already ended.
    mutating func graceExpired(generation expired: Int) -> [Waiter]? {
        guard case let .switching(_, generation) = state, generation == expired else { return nil }
        state = .idle
        defer { waiters = [] }
        return waiters
    }

    /// The peer is disconnected while it switches (what was held for the winner overflowed its
    /// outbox limit): returns the waiters to resume. The winner, should it still come, is then a
    /// new connection. Does nothing unless switching.
    mutating func abandon() -> [Waiter] {
        guard case .switching = state else { return [] }
        state = .idle
        defer { waiters = [] }
        return waiters
    }

    /// The transceiver stopped: forgets everything; returns the waiters to resume.
    mutating func stop() -> [Waiter] {
        state = .idle
        retiring = []
        defer { waiters = [] }
        return waiters
    }

    // MARK: Frames

    /// Where a frame for the peer goes.
    enum Route {
        /// Write it on this connection.
        case send(Connection)
        /// Held for the winner of a switch; it goes out on it, in order.
        case held
        /// The hold is full: wait for the switch to end (``wait(_:)``), then route again.
        case full
        /// The peer is not connected.
        case notConnected
    }

    /// Routes a frame for the peer; held frames count against `limit` (the peer's outbox limit,
    /// ``PeerConfiguration/maximumQueuedOutboundBytes``).
    mutating func route(_ frame: ByteBuffer, limit: Int) -> Route {
        switch state {
        case .idle:
            return .notConnected
        case let .connected(link):
            return .send(link.connection)
        case .switching(var hold, let generation):
            guard hold.bytes + frame.readableBytes <= limit || hold.frames.isEmpty else { return .full }
            hold.append(frame)
            state = .switching(hold, generation: generation)
            return .held
        case .flushing(let link, var hold):
            guard hold.bytes + frame.readableBytes <= limit || hold.frames.isEmpty else { return .full }
            hold.append(frame)
            state = .flushing(link, hold)
            return .held
        }
    }

    /// Where a sender that can wait (`send(_:to:)`, a request) writes.
    enum Destination {
        /// On this connection.
        case connection(Connection)
        /// Nowhere yet: wait for the switch to end (``wait(_:)``), then ask again. Frames that
        /// cannot wait (broadcasts, replies) are held meanwhile and go first.
        case afterSwitch
        /// The peer is not connected.
        case none
    }

    /// Where a sender that can wait writes a frame for the peer. Such a sender waits out a
    /// switch instead of leaving its frame in the hold: should the winner not come, its call
    /// throws, rather than returning for a frame that is then dropped.
    var destination: Destination {
        switch state {
        case .idle: return .none
        case let .connected(link): return .connection(link.connection)
        case .switching, .flushing: return .afterSwitch
        }
    }

    /// What ``wait(_:)`` decided.
    enum Wait {
        /// Do not wait: route again now (the peer is connected, or not at all).
        case now
        /// Wait: the waiter is resumed when the switch ends, either way.
        case waiting
    }

    /// Leaves `waiter` to be resumed when the switch (and the move of held frames) ends.
    mutating func wait(_ waiter: Waiter) -> Wait {
        switch state {
        case .switching, .flushing:
            waiters.append(waiter)
            return .waiting
        case .idle, .connected:
            return .now
        }
    }

    // MARK: Inbound order

    /// Whether a message without a session number that arrived on `connection` must wait before
    /// it is handled: the peer may still be writing on a connection that lost a tie-break, and
    /// what it wrote there was sent before anything on the winner. Held until the last loser
    /// closed (``finished(_:)`` returns true). A session frame needs no such wait: its number
    /// orders it (``PeerRecord/receiveNumbered(_:on:)``).
    func holdsInbound(from connection: Connection) -> Bool {
        !retiring.isEmpty && current === connection
    }
}

extension PeerStateMachine: Sendable where Connection: Sendable, Waiter: Sendable {}
extension PeerStateMachine.Link: Sendable where Connection: Sendable {}
extension PeerStateMachine.State: Sendable where Connection: Sendable {}
extension PeerStateMachine.Hold: Sendable {}
