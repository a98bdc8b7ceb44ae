import NIOCore

// Questions about peers, and the frames users send them: to a peer, never to a connection the
// caller picks.
extension ConnectionManager {
    /// Whether the peer is connected (also while it switches to a tie-break's winner).
    func isConnected(_ peerID: String) -> Bool {
        state.withLockedValue { state in
            // In place (State.peer(at:_:)): every request asks this.
            guard let index = state.peers.index(forKey: peerID) else { return false }
            return state.peer(at: index) { $0.isConnected }
        }
    }

    /// Throws for the first of `peers` that is not connected: the reason its last connection
    /// ended, when it ended badly and recently, else ``PeerKitError/peerNotConnected(peer:)``.
    /// A send to several peers checks them all first, so that nothing is sent unless it can go
    /// to every one of them.
    func requireConnected(_ peers: [Peer]) throws(PeerKitError) {
        for peer in peers { try requireConnected(peer) }
    }

    /// Throws when `peer` is not connected: the reason its last connection ended, when it ended
    /// badly and recently, else ``PeerKitError/peerNotConnected(peer:)``.
    func requireConnected(_ peer: Peer) throws(PeerKitError) {
        guard !isConnected(peer.id) else { return }
        throw recentFailure(of: peer.id) ?? .peerNotConnected(peer: peer.name)
    }

    /// Whether the peer has no connection now, and its session waits for it to come back within
    /// its resume window.
    func isSuspended(_ peerID: String) -> Bool {
        state.withLockedValue { $0.peers[peerID]?.session?.isSuspended ?? false }
    }

    /// The peer, when it is connected (also while it switches to a tie-break's winner).
    func connectedPeer(_ peerID: String) -> Peer? {
        state.withLockedValue { state in
            state.peers[peerID].flatMap { $0.isConnected ? $0.snapshot : nil }
        }
    }

    /// The connection frames for a peer go to now (nil while it switches to a tie-break's winner).
    func connection(to peerID: String) -> PeerConnection? {
        state.withLockedValue { $0.peers[peerID]?.active }
    }

    /// The address `peerID`'s connection comes from, as the per-address limits count it (see
    /// ``HandshakeSlots/source(of:)``); nil without a connection.
    func sourceAddress(of peerID: String) -> String? {
        connection(to: peerID).flatMap { Slots.source(of: $0.channel.remoteAddress) }
    }

    /// The connection frames for a peer go to now; while the peer is switching to the connection
    /// that won a tie-break (its `bye` closed the one in use, and the winner's handshake has not
    /// completed here yet), waits for the winner, at most ``Configuration/handshakeTimeout``. Nil
    /// when the peer is not connected, or the winner did not come. For what is bound to one
    /// connection (a resource transfer); messages go through ``send(_:to:)``.
    func connectionAfterSwitch(to peerID: String) async -> PeerConnection? {
        while true {
            if let active = connection(to: peerID) { return active }
            guard await waitForSwitch(of: peerID) else { return connection(to: peerID) }
        }
    }

    /// Waits until `peerID`'s switch to its tie-break winner (and the move of what was held for
    /// it) ended, either way. Returns false at once when the peer is not switching.
    private func waitForSwitch(of peerID: String) async -> Bool {
        var waiting = false
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiting = state.withLockedValue { state -> Bool in
                guard state.running, var record = state.peers[peerID] else { return false }
                guard case .waiting = record.link.wait(continuation) else { return false }
                state.peers[peerID] = record
                return true
            }
            if !waiting { continuation.resume() }
        }
        return waiting
    }

    /// Queues `frame` for `peer` on whichever connection is its own: the one in use, or the
    /// tie-break's winner that takes over from it (waited for, at most
    /// ``Configuration/handshakeTimeout``, behind the frames held for it). Paced like a socket:
    /// while the connection's outbox holds more than ``PeerConnection/outboxHighWatermark`` bytes
    /// it waits for the peer to read, at most ``Configuration/slowPeerGracePeriod``, so that
    /// what senders can queue for one peer stays within that mark plus one frame.
    /// - Throws: why the peer is not connected (the reason its last connection ended, when it
    ///   ended badly and recently), or ``PeerKitError/peerTooSlow(peer:queuedBytes:limit:grace:)``
    ///   when it did not read for the grace period (it is then disconnected).
    func send(_ frame: ByteBuffer, to peer: Peer) async throws(PeerKitError) {
        if configuration.sessions != nil, try await sendInSession(frame, to: peer) { return }
        var refusedBy: PeerConnection?
        while true {
            let destination = state.withLockedValue { state -> PeerLink.Destination in
                guard state.running, let index = state.peers.index(forKey: peer.id) else { return .none }
                return state.peer(at: index) { $0.link.destination }
            }
            switch destination {
            case let .connection(connection):
                switch connection.enqueue(frame, below: PeerConnection.outboxHighWatermark) {
                case .queued:
                    return
                case .full:
                    try await connection.waitForRoom(grace: configuration.slowPeerGracePeriod, limit: configuration.maximumQueuedOutboundBytes)
                case .closed:
                    // The manager hears of a close before the connection refuses frames, so the
                    // next look goes elsewhere; the same connection twice means it ended.
                    if refusedBy === connection { throw connection.closeError ?? .connectionClosed(peer: peer.name) }
                    refusedBy = connection
                }
            case .afterSwitch:
                _ = await waitForSwitch(of: peer.id)
            case .none:
                throw recentFailure(of: peer.id) ?? .peerNotConnected(peer: peer.name)
            }
        }
    }

    /// Queues `frame` (a reply, or an error answering a request) for `peerID` on whichever
    /// connection is its own, without waiting: the dispatcher runs a peer's handlers only while
    /// its outbox has room (``outboxState(of:)``), so this adds at most one frame over the limit.
    /// Returns false when the peer is no longer connected (the frame is dropped: nobody is there
    /// to read it).
    @discardableResult
    func sendWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool {
        if configuration.sessions != nil, let sent = sendInSessionWithoutWaiting(frame, to: peerID) { return sent }
        var refusedBy: PeerConnection?
        while true {
            let route = state.withLockedValue { state -> PeerLink.Route in
                // In place: a copy stored back would copy what the state machine holds.
                guard state.running, let index = state.peers.index(forKey: peerID) else { return .notConnected }
                return state.peers.values[index].link.route(frame, limit: .max)
            }
            switch route {
            case let .send(connection):
                guard case .closed = connection.enqueue(frame, below: nil) else { return true }
                if refusedBy === connection { return false }
                refusedBy = connection
            case .held:
                return true
            case .full, .notConnected:
                return false
            }
        }
    }

    /// Whether the peer's outbox has room (holds less than
    /// ``Configuration/maximumQueuedOutboundBytes``, and, while the transceiver's
    /// ``OutboundBudget`` is spent, nothing charged to it, in its outbox or its session's
    /// retransmit tail): the dispatcher runs the handlers of a peer's messages only then, so a
    /// peer that does not read (or acknowledge) its replies gets no more made for it, and its
    /// further requests wait unread. Under a spent budget this holds for every peer together: the
    /// process holds at most the budget plus one reply per peer.
    func outboxState(of peerID: String) -> OutboxState {
        let probe = state.withLockedValue { state -> (connection: PeerConnection?, held: Int, sessionCharged: Int)? in
            // In place (see PeerRecord.outboxProbe()): this runs for every message handled.
            guard state.running, let index = state.peers.index(forKey: peerID) else { return nil }
            return state.peers.values[index].outboxProbe()
        }
        guard let (connection, held, sessionCharged) = probe else { return .disconnected }
        // Switching or suspended: the frames held for the winner and the session's tail count
        // alone. Both are charged to the budget, as is what waits in an outbox.
        guard let connection else {
            guard held < configuration.maximumQueuedOutboundBytes else { return .full }
            return (held > 0 || sessionCharged > 0) && outboundBudget.isSpent ? .full : .room
        }
        guard connection.queuedOutboundBytes < configuration.maximumQueuedOutboundBytes else { return .full }
        guard outboundBudget.isSpent else { return .room }
        return held > 0 || sessionCharged > 0 || connection.chargedOutboundBytes > 0 ? .full : .room
    }

    /// Sends `frame` to every connected peer, and holds it for each peer that is switching
    /// connections until the winner arrives. Does not wait: a peer whose outbox is full (it did
    /// not read ``Configuration/maximumQueuedOutboundBytes``) does not get it and is
    /// disconnected as too slow, so what a peer can make us queue stays within its limit plus
    /// one frame. The frame is one buffer in every peer's outbox, so it is not charged to the
    /// transceiver's ``OutboundBudget``: the memory it holds is bounded by the slowest peer's
    /// limit. Returns how many peers it went or will go to.
    func broadcast(_ frame: ByteBuffer) -> Int {
        let limit = configuration.maximumQueuedOutboundBytes
        var overflowed: [(peerID: String, connection: PeerConnection?, queued: Int)] = []
        var sessionFailures: [PeerConnection] = []
        let (targets, held) = withState { state -> ([(String, PeerConnection)], Int) in
            guard state.running else { return ([], 0) }
            var targets: [(String, PeerConnection)] = []
            var held = 0
            // A walk over the records' indices, which (unlike a loop over `state.peers.keys`)
            // holds no reference to the dictionary's storage: each record is changed in place,
            // not in a copy of the whole dictionary, and no array of the keys is made. Nothing
            // below adds or removes a record but the end of a session at its bound, which is done
            // after the walk.
            var sessionsToEnd: [String] = []
            var next = state.peers.startIndex
            while next != state.peers.endIndex {
                let index = next
                state.peers.formIndex(after: &next)
                if state.peer(at: index, { $0.sessionEndsAtBound }) {
                    sessionsToEnd.append(state.peers.keys[index])
                    continue
                }
                switch recordSessionFrame(frame, at: index, canWait: false, shared: true, state: &state) {
                case .kept:
                    held += 1
                    continue
                case let .refuse(close):
                    if let close { sessionFailures.append(close) }
                    continue
                case .full, .failed, .notConnected:
                    continue
                case .noSession:
                    break
                }
                // Without a session, routed by the peer's state machine, in place.
                switch state.peers.values[index].link.route(frame, limit: limit) {
                case let .send(connection): targets.append((state.peers.keys[index], connection))
                case .held: held += 1
                case .full: overflowed.append((state.peers.keys[index], nil, state.peers.values[index].link.heldBytes))
                case .notConnected: break
                }
            }
            for id in sessionsToEnd {
                // At the bound while away: the frame is not kept, and the session ends (the
                // peer is disconnected; its record may go).
                _ = recordSessionFrame(frame, for: id, canWait: false, shared: true, state: &state)
            }
            return (targets, held)
        }
        for connection in sessionFailures { connection.requestClose(.failed(sessionBoundFailure())) }
        var sent = held
        for (id, connection) in targets {
            switch connection.enqueue(frame, below: limit, shared: true) {
            case .queued:
                sent += 1
            case let .full(queued):
                overflowed.append((id, connection, queued))
            case .closed:
                if sendWithoutWaiting(frame, to: id) { sent += 1 }
            }
        }
        for (id, connection, queued) in overflowed {
            tooSlow(peerID: id, connection: connection, queuedBytes: queued)
        }
        return sent
    }

    /// Disconnects a peer whose outbox is full when a frame that cannot wait (a broadcast) is
    /// sent to it: it did not read what is queued for it.
    private func tooSlow(peerID: String, connection: PeerConnection?, queuedBytes: Int) {
        let failure = ConnectionStateMachine.Failure.tooSlow(queuedBytes: queuedBytes, limit: configuration.maximumQueuedOutboundBytes, grace: .zero)
        if let connection {
            connection.requestClose(.failed(failure))
            return
        }
        // Switching: the hold for the winner is full. The peer is disconnected; the winner,
        // should it still come, is a new connection.
        var waiters: [CheckedContinuation<Void, Never>] = []
        let timer = withState { state -> PeerTimer? in
            guard state.running, var record = state.peers[peerID], record.link.isSwitching else { return nil }
            let error = ConnectionStateMachine.CloseReason.failed(failure).error(peer: record.peer.name)
            waiters = record.link.abandon()
            let timer = record.switchTimer?.timer
            record.switchTimer = nil
            disconnected(&record, reason: error, state: &state)
            return timer
        }
        timer?.cancel()
        for waiter in waiters { waiter.resume() }
    }

    /// How many senders wait for `peerID`'s switch to its tie-break winner (a diagnostic for tests).
    func switchWaiterCount(of peerID: String) -> Int {
        state.withLockedValue { $0.peers[peerID]?.link.waiterCount ?? 0 }
    }

    /// Whether `peerID` is switching to its tie-break winner (a diagnostic for tests).
    func isSwitching(_ peerID: String) -> Bool {
        state.withLockedValue { $0.peers[peerID]?.link.isSwitching ?? false }
    }

    /// Why the last connection to `peerID` ended badly, if it did recently (the last
    /// ``State/maximumRecentFailures`` peers are remembered): what `send` to it reports.
    func recentFailure(of peerID: String) -> PeerKitError? {
        state.withLockedValue { $0.recentFailures[peerID] }
    }

    /// Every active connection.
    func activeConnections() -> [PeerConnection] {
        state.withLockedValue { $0.peers.values.compactMap(\.active) }
    }

    /// How many duplicate connections the tie-break has resolved.
    func tieBreakCount() -> Int {
        state.withLockedValue { $0.tieBreaks }
    }

    /// How many connections are open, including ones still in their handshake or being retired.
    func openConnectionCount() -> Int {
        state.withLockedValue { $0.connections.count }
    }

    /// Peers that are discovered or connected.
    func availablePeers() -> [Peer] {
        state.withLockedValue { Self.available($0) }
    }

    /// Peers that are connected.
    func connectedPeers() -> [Peer] {
        state.withLockedValue { $0.peers.values.filter(\.isConnected).map(\.snapshot).sorted(by: Self.byName) }
    }

    static func available(_ state: State) -> [Peer] {
        state.peers.values.filter(\.isAvailable).map(\.snapshot).sorted(by: byName)
    }

    private static func byName(_ a: Peer, _ b: Peer) -> Bool {
        (a.name, a.id) < (b.name, b.id)
    }
}
