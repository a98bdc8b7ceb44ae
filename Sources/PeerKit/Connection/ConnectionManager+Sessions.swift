import NIOCore

// Resumable sessions (feature `resume`): numbering, keeping and resending frames, acknowledgements,
// the resume window.
extension ConnectionManager {
    /// Sets up `record`'s session for a connection whose handshake completed: the same session
    /// when the same run of the same authenticated peer comes back, else a new one (what was
    /// pending for a restarted peer fails, and it is reported disconnected first when it was
    /// suspended). Returns whether the peer was suspended and now resumes. Its record decides
    /// (``PeerRecord/sessionArrives(incarnation:fingerprint:maximumUnacknowledgedBytes:maximumQueuedOutboundBytes:perFrameOverhead:)``);
    /// this carries it out. Call with the lock held.
    func sessionArrives(on connection: PeerConnection, remote: Hello, record: inout PeerRecord, state: inout State) -> Bool {
        guard let sessions = configuration.sessions else { return false }
        let arrival = record.sessionArrives(incarnation: remote.resumableSession, fingerprint: connection.peer?.fingerprint,
                                            maximumUnacknowledgedBytes: sessions.maximumUnacknowledgedBytes,
                                            maximumQueuedOutboundBytes: configuration.maximumQueuedOutboundBytes,
                                            perFrameOverhead: PeerConnection.perFrameOverhead, share: newBudgetShare)
        if let ended = arrival.ended {
            carryOut(ended, state: &state)
            state.rememberFailure(ended.error, of: record.peer.id)
        }
        if let event = arrival.event { state.emit(event) }
        return arrival.resumes
    }

    /// A part of the ``OutboundBudget`` for a new session's retransmit tail, or for what a peer's
    /// switch holds for its winner. Its releases happen under the lock, so the dispatcher they may
    /// wake (the budget fell below its limit, or the part holds nothing any more) is told on the
    /// timer loop, after the lock is released.
    func newBudgetShare() -> OutboundBudget.Share {
        let loop = timerLoop
        let messagesBox = self.messagesBox  // not `self`: see configurePipeline
        return OutboundBudget.Share(budget: outboundBudget) {
            loop.execute { messagesBox.withLockedValue { $0 }?.outboxHasRoom() }
        }
    }

    /// What recording a session frame for a peer decided.
    enum SessionSend {
        /// The peer has no session: the frame goes as without the feature.
        case noSession
        /// The transceiver stopped, or the peer is unknown.
        case notConnected
        /// Kept until acknowledged, and written on `current` (when connected).
        case kept(current: PeerConnection?)
        /// At the bound while the peer is connected: a sender that can wait waits for acknowledgements.
        case full
        /// At the bound while the peer is connected, for a frame that cannot wait: close
        /// `close` as failed (``sessionBoundFailure()``).
        case refuse(close: PeerConnection?)
        /// The session ended (or was ended now: the peer is disconnected): throw this.
        case failed(PeerKitError)
    }

    /// Numbers `frame` in the peer's session and keeps it, charged to the ``OutboundBudget`` until
    /// the peer acknowledges it, unless it is `shared` (a broadcast's, the same buffer for every
    /// peer). Call with the lock held.
    func recordSessionFrame(_ frame: ByteBuffer, for peerID: String, canWait: Bool, shared: Bool = false, state: inout State) -> SessionSend {
        guard state.running, let index = state.peers.index(forKey: peerID) else { return .notConnected }
        return recordSessionFrame(frame, at: index, canWait: canWait, shared: shared, state: &state)
    }

    /// ``recordSessionFrame(_:for:canWait:shared:state:)`` for the peer at `index` of
    /// `state.peers`, found by the caller. The index is still valid when this returns
    /// ``SessionSend/noSession``: nothing was changed.
    func recordSessionFrame(_ frame: ByteBuffer, at index: Dictionary<String, PeerRecord>.Index, canWait: Bool, shared: Bool, state: inout State) -> SessionSend {
        // In place (see PeerRecord.recordInSession): no copy of the record is held meanwhile.
        // Taken apart at once: reading the parts of a named tuple copies all of it each time
        // (its writes' frames included), and this runs for every frame sent in a session.
        guard let (outcome, current, writes) = state.peers.values[index].recordInSession(frame, charged: !shared) else { return .noSession }
        switch outcome {
        case .kept:
            // The writes end with this frame, after any the session had not written yet.
            if let writes, let current { append(writes, to: current, state: &state) }
            return .kept(current: current)
        case .full:
            let peerID = state.peers.keys[index]
            guard var record = state.peers[peerID], let reached = record.sessionBoundReached() else { return .notConnected }
            switch reached {
            case let .connected(current):
                return canWait ? .full : .refuse(close: current)
            case let .ended(ended):
                endSession(ended, of: &record, state: &state)
                return .failed(ended.error)
            }
        case let .ended(error):
            return .failed(error)
        }
    }

    /// Carries out the end of `record`'s session its record decided (``PeerRecord/sessionBoundReached()``)
    /// and reports the peer disconnected with its error (the peer has no connection). Call with
    /// the lock held.
    func endSession(_ ended: PeerRecord.SessionEnd, of record: inout PeerRecord, state: inout State) {
        carryOut(ended, state: &state)
        state.rememberFailure(ended.error, of: record.peer.id)
        disconnected(&record, reason: ended.error, state: &state)
    }

    /// Hands what a session's end left to ``withState(_:)``: its waiting senders are resumed and
    /// its window timer is cancelled once the lock is released. Call with the lock held.
    func carryOut(_ ended: PeerRecord.SessionEnd?, state: inout State) {
        guard let ended else { return }
        state.waitersToResume += ended.waiters
        if let timer = ended.windowTimer { state.timersToCancel.append(timer) }
    }

    /// The failure a peer is disconnected with when it does not acknowledge what was sent to it.
    func sessionBoundFailure() -> ConnectionStateMachine.Failure {
        .limitExceeded("it did not acknowledge what was sent to it: \(configuration.sessions?.maximumUnacknowledgedBytes ?? 0) bytes waited for its acknowledgement, the limit (PeerConfiguration.maximumUnacknowledgedBytes)")
    }

    /// ``send(_:to:)`` for a peer with a session. Returns false when it has none.
    func sendInSession(_ frame: ByteBuffer, to peer: Peer) async throws(PeerKitError) -> Bool {
        while true {
            switch withState({ recordSessionFrame(frame, for: peer.id, canWait: true, state: &$0) }) {
            case .noSession, .notConnected:
                return false
            case let .kept(current):
                // Paced like a socket, as without a session.
                if let current, current.queuedOutboundBytes >= PeerConnection.outboxHighWatermark {
                    do {
                        try await current.waitForRoom(grace: configuration.slowPeerGracePeriod, limit: configuration.maximumQueuedOutboundBytes)
                    } catch where error.code == .peerTooSlow {
                        throw error
                    } catch {
                        // The connection died: the frame is kept by the session, for the resume.
                    }
                }
                return true
            case .full, .refuse:
                await waitForAcknowledgements(of: peer.id)
            case let .failed(error):
                throw error
            }
        }
    }

    /// ``sendWithoutWaiting(_:to:)`` for a peer with a session. Nil when it has none.
    func sendInSessionWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool? {
        switch withState({ recordSessionFrame(frame, for: peerID, canWait: false, state: &$0) }) {
        case .noSession, .notConnected:
            return nil
        case .kept:
            return true
        case let .refuse(close):
            close?.requestClose(.failed(sessionBoundFailure()))
            return false
        case .full, .failed:
            return false
        }
    }

    /// Waits until the peer's acknowledgements make room in its session (or the session ends).
    /// A peer that acknowledges nothing for ``Configuration/slowPeerGracePeriod`` meanwhile is
    /// disconnected (``acknowledgementsOverdue(of:since:)``).
    private func waitForAcknowledgements(of peerID: String) async {
        guard let before = state.withLockedValue({ $0.peers[peerID]?.session?.acknowledged }) else { return }
        let timer = configuration.clock.schedule(on: timerLoop, in: .nanoseconds(configuration.slowPeerGracePeriod.nanoseconds)) {
            self.acknowledgementsOverdue(of: peerID, since: before)
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = state.withLockedValue { state -> Bool in
                guard state.running, var record = state.peers[peerID], var session = record.session,
                      case .waiting = session.wait(continuation) else { return false }
                record.session = session
                state.peers[peerID] = record
                return true
            }
            if !waiting { continuation.resume() }
        }
        timer.cancel()
    }

    /// A sender waited the grace period for acknowledgements: when none came, the peer is
    /// disconnected (its connection failed, or, suspended, its session ended).
    private func acknowledgementsOverdue(of peerID: String, since before: UInt64) {
        let close = withState { state -> PeerConnection? in
            guard state.running, var record = state.peers[peerID],
                  let reached = record.acknowledgementsOverdue(since: before) else { return nil }
            switch reached {
            case let .connected(current):
                return current
            case let .ended(ended):
                endSession(ended, of: &record, state: &state)
                return nil
            }
        }
        close?.requestClose(.failed(sessionBoundFailure()))
    }

    /// Appends what `peerID`'s session has not written yet to its current connection's outbox,
    /// in order, with the lock held: the wire order is then the numbering's, whoever sends, and
    /// no writer has to be claimed. The drains are scheduled once the lock is released
    /// (``State/finishAppend(_:to:)``). A connection that ended refuses them: they stay in the
    /// session, for the resume. Call with the lock held (``withState(_:)``).
    private func writeSession(of peerID: String, state: inout State) {
        // In place (see PeerRecord.recordInSession): no copy of the record is held meanwhile.
        guard let index = state.peers.index(forKey: peerID),
              let (current, writes) = state.peers.values[index].takeSessionWrites() else { return }
        append(writes, to: current, state: &state)
    }

    /// Appends a session's `writes` to `connection`'s outbox (see ``writeSession(of:state:)``):
    /// the session charges them to the budget, the outbox does not.
    private func append(_ writes: Session.Writes, to connection: PeerConnection, state: inout State) {
        let appended = if let from = writes.from {
            connection.appendInOrder([SessionFrame.resend(from: from).encode()] + writes.frames)
        } else {
            connection.appendInOrder(writes.frames)
        }
        if appended.bytes > 0 { state.finishAppend(appended, to: connection) }
    }

    /// A `peerkit.resume`, `peerkit.resend` or `peerkit.ack` from the peer on `connection`: its
    /// record decides (``PeerRecord/sessionControl(_:on:)``); this carries it out.
    func sessionControl(_ frame: SessionFrame, on connection: PeerConnection, from peer: Peer) {
        var violation: String?
        var resent = 0
        var restarted: PeerRecord.SessionRestart?
        withState { state in
            // In place (see PeerRecord): the record's session alone refers to the retransmit
            // tail while it changes (an acknowledgement drops its head), so that it is not copied.
            guard let index = state.peers.index(forKey: peer.id) else { return }
            let outcome = state.peers.values[index].sessionControl(frame, on: connection)
            state.waitersToResume += outcome.waiters
            if let timer = outcome.windowTimer { state.timersToCancel.append(timer) }
            if let restart = outcome.restart { state.queue(.sessionRestarted(restart.peer, reason: restart.reason)) }
            violation = outcome.violation
            restarted = outcome.restart
            if outcome.writesSession {
                resent = outcome.resending
                writeSession(of: peer.id, state: &state)
            }
        }
        if let violation { connection.fail(violation) }
        if let restarted {
            logger.warning("\(peer.description.capitalizedFirst) ended its side of the session while this side kept it (its resume window ran out first, or it reached a limit), so it starts again: \(restarted.lostFrames) messages (\(restarted.lostBytes) bytes) written to it and not acknowledged may not have arrived, and requests waiting on it failed.")
        }
        if resent > 0 { logger.debug("Resending \(resent) session frames to \(peer) that it did not acknowledge.") }
    }

    /// A numbered frame (a message, request or reply) from a peer with a session.
    func armAcknowledgementTimer(for peerID: String) {
        _ = configuration.clock.schedule(on: timerLoop, in: Session.acknowledgementDelay) {
            self.acknowledgementTimerFired(for: peerID)
        }
    }

    /// Acknowledges what arrived since the last acknowledgement, on the peer's current connection.
    private func acknowledgementTimerFired(for peerID: String) {
        let acknowledgement = state.withLockedValue { state -> (count: UInt64, connection: PeerConnection)? in
            // In place (see PeerRecord).
            guard let index = state.peers.index(forKey: peerID) else { return nil }
            return state.peers.values[index].acknowledgementTimerFired()
        }
        if let (count, connection) = acknowledgement {
            connection.send(SessionFrame.ack(received: count).encode())
        }
    }

    /// The resume window of a suspended peer ran out: it is disconnected, and what was pending
    /// for it throws ``PeerKitError/sessionExpired(peer:window:)``. A connection that came back
    /// meanwhile but was not resumed by the peer is closed. Its record decides
    /// (``PeerRecord/windowExpired(generation:window:)``); this carries it out.
    func windowExpired(peerID: String, generation: Int) {
        guard let sessions = configuration.sessions else { return }
        var close: PeerConnection?
        var expired: PeerKitError?
        withState { state in
            guard state.running, var record = state.peers[peerID],
                  let expiry = record.windowExpired(generation: generation, window: sessions.window) else { return }
            expired = expiry.error
            state.waitersToResume += expiry.waiters
            state.rememberFailure(expiry.error, of: peerID)
            switch expiry.then {
            case let .close(connection):
                close = connection
                state.peers[peerID] = record
            case .disconnect:
                disconnected(&record, reason: expiry.error, state: &state)
            }
        }
        if let expired { logger.notice("\(expired)") }
        close?.requestClose(.failed(.handshake("it did not resume its session within \(sessions.window.peerKitSeconds) (PeerConfiguration.sessionResumeWindow)")))
    }
}
