import NIOCore

// What connections report (``PeerConnectionDelegate``): handshakes, frames, closes.
extension ConnectionManager {
    func connectionEstablished(_ connection: PeerConnection, remote: Hello) {
        withState { $0.pendingHandshakes.completed(ObjectIdentifier(connection.channel)) }
        // The admission hook (when there is one) decides before the peer is reported connected.
        let waiting = connection.peer.map { peer in
            configuration.admission.begin(
                connection, peer: peer,
                admitted: { self.admitted(connection, remote: remote) },
                deliver: { self.connection(connection, received: $0) }
            )
        } ?? false
        if !waiting { admitted(connection, remote: remote) }
    }

    /// The peer on `connection` completed its handshake and was admitted: it is connected.
    private func admitted(_ connection: PeerConnection, remote: Hello) {
        var switched: (waiters: [CheckedContinuation<Void, Never>], timer: PeerTimer?)?
        var resume: (frame: ByteBuffer, resumed: Bool)?
        var tieBreak: (peer: Peer, newWins: Bool, peerLostIt: Bool)?
        let now = configuration.clock.now(on: connection.channel.eventLoop)
        connection.markEstablished(at: now)
        let interval = configuration.heartbeatInterval
        let (retired, reached) = withState { state -> (PeerConnection?, (name: String, attempts: Int)?) in
            guard state.running else { return (nil, nil) }
            // Connected again: an earlier failure is no longer why it cannot be sent to.
            state.recentFailures[remote.peerID] = nil
            var reached: (String, Int)?
            if let key = connection.serviceKey, var service = state.services[key] {
                let failed = service.dialer.reached()
                if failed > 0 { reached = (service.service.name, failed) }
                service.peerID = remote.peerID
                state.services[key] = service
            }
            let existing = state.peers[remote.peerID]
            let wasAvailable = existing?.isAvailable ?? false
            var record = existing ?? PeerRecord(peer: Peer(id: remote.peerID, name: remote.name, isConnected: true))
            var info = record.peer.discoveryInfo
            info.merge(remote.discoveryInfo ?? [:]) { _, hello in hello }
            record.peer = Peer(id: remote.peerID, name: remote.name, discoveryInfo: info, isConnected: true, fingerprint: connection.peer?.fingerprint)
            if let key = connection.serviceKey, state.services[key] != nil { record.serviceKeys.insert(key) }
            if connection.direction == .inbound { record.dialsUs = true }
            let suspended = sessionArrives(on: connection, remote: remote, record: &record, state: &state)
            defer { state.peers[remote.peerID] = record }
            state.queue(.established(connection))
            // Feature resume: every connection starts with peerkit.resume; the one that becomes
            // the peer's writes no session frame until the peer's resume arrives on it.
            defer {
                if let frame = record.sessionConnected(connection) { resume = (SessionFrame.resume(frame).encode(), suspended) }
                if record.link.current === connection { connection.setSessionShare(record.session?.share) }
            }

            // An existing connection that went quiet, or that is a heartbeat interval older than this
            // one, is presumed lost: the peer dialled because it lost it (TieBreak).
            let presumedLost = { (existing: PeerConnection) in
                TieBreak.presumedLost(quiet: existing.isQuiet, establishedAt: existing.establishedAt, now: now, heartbeatInterval: interval)
            }
            switch record.link.established(connection, direction: connection.direction, localPeerID: localPeerID, remotePeerID: remote.peerID, presumedLost: presumedLost) {
            case .connected:
                // A suspended peer is back: it was connected all along, for the user.
                if !wasAvailable { state.emit(.peerAdded(record.snapshot)) }
                state.emit(suspended ? .peerResumed(record.snapshot) : .peerConnected(record.snapshot))
                state.peers[remote.peerID] = record
                state.emit(.availablePeersChanged(Self.available(state)))
                return (nil, reached)
            case let .retire(loser, peerLostIt):
                state.tieBreaks += 1
                tieBreak = (record.peer, loser !== connection, peerLostIt)
                return (loser, reached)
            case let .switched(waiters, generation):
                // The connection that won the tie-break arrived: nothing changed for the user.
                var timer: PeerTimer?
                if let armed = record.switchTimer, armed.generation == generation {
                    timer = armed.timer
                    record.switchTimer = nil
                }
                switched = (waiters, timer)
                return (nil, reached)
            }
        }
        if let resume {
            connection.send(resume.frame)
            if resume.resumed { logger.info("\(connection) is back within its resume window; what it did not receive is sent again.") }
        }
        if let tieBreak, let retired {
            logger.debug("Two connections to \(tieBreak.peer); keeping the \(tieBreak.newWins ? "new" : "existing") one.")
            // Messages on the winner wait until nothing more can arrive on the loser.
            let peerID = remote.peerID
            retired.channel.closeFuture.whenComplete { _ in self.retiredConnectionFinished(retired, of: peerID) }
        }
        if let switched {
            switched.timer?.cancel()
            flushHeldFrames(of: remote.peerID, to: connection)
            for waiter in switched.waiters { waiter.resume() }
        }
        if let reached {
            logger.notice("Reached \"\(LogSafe.text(reached.name, maximumBytes: 80))\" again after \(reached.attempts) failed attempts.")
        }
        retired?.retire(peerLostIt: tieBreak?.peerLostIt ?? false)
    }

    /// Moves the frames held for `peerID` during its switch to `winner`, in order, until none is
    /// left; frames sent meanwhile join the hold behind them (``PeerStateMachine/takeHeldFrames(for:)``).
    private func flushHeldFrames(of peerID: String, to winner: PeerConnection) {
        while true {
            let (frames, waiters) = state.withLockedValue { state -> (CircularBuffer<ByteBuffer>, [CheckedContinuation<Void, Never>]) in
                guard var record = state.peers[peerID] else { return ([], []) }
                defer { state.peers[peerID] = record }
                return record.link.takeHeldFrames(for: winner)
            }
            for waiter in waiters { waiter.resume() }
            if frames.isEmpty { return }
            for frame in frames where !winner.enqueue(frame, below: nil).isQueued {
                // The winner ended meanwhile: what is left goes wherever the peer is now.
                sendWithoutWaiting(frame, to: peerID)
            }
        }
    }

    func connectionRenamed(_ connection: PeerConnection, remote: Hello) {
        let renamed = withState { state -> Peer? in
            guard state.running, var record = state.peers[remote.peerID], record.active === connection else { return nil }
            let before = record.peer
            record.peer = Peer(id: remote.peerID, name: remote.name, discoveryInfo: record.peer.discoveryInfo, isConnected: true, fingerprint: record.peer.fingerprint)
            state.peers[remote.peerID] = record
            state.emit(.availablePeersChanged(Self.available(state)))
            return before
        }
        if let renamed { logger.info("\(renamed) is now called \"\(LogSafe.text(remote.name))\".") }
    }

    func connection(_ connection: PeerConnection, received envelopes: [Envelope]) {
        guard let peer = connection.peer else {
            for envelope in envelopes { connection.inboundDropped(envelope) }
            return
        }
        let numbers = configuration.sessions != nil && connection.offersResumableSession
        // Frames for handlers, `envelopes[run]`, are taken in together with one lock; any other
        // frame is carried out where it stands, after the run before it was taken in.
        var run = envelopes.startIndex..<envelopes.startIndex
        /// Takes in the run before the frame at `index`, which is not for handlers; the next run
        /// starts after it.
        func endRun(at index: Int) {
            take(envelopes[run], numbered: numbers, from: peer, on: connection)
            run = index + 1..<index + 1
        }
        for index in envelopes.indices {
            // Read in place, `envelopes[index]`, not bound to a name: a binding copies the
            // envelope (a retain and a release of each of its strings and its payload), and
            // this runs for every message.
            if configuration.admission.hold(envelopes[index], on: connection) {
                endRun(at: index)
                continue
            }
            // Only the protocol's own types (all `peerkit.…`) can be session control frames, and
            // only they are looked up in `passedUp`: an application's frame is told by one prefix.
            guard envelopes[index].isControl else {
                run = run.lowerBound..<index + 1
                continue
            }
            let envelope = envelopes[index]
            if numbers {
                let control: SessionFrame?
                do throws(ConnectionStateMachine.Failure) {
                    control = try SessionFrame.parse(envelope)
                } catch {
                    endRun(at: index)
                    connection.inboundDropped(envelope)
                    connection.requestClose(.failed(error))
                    continue
                }
                if let control {
                    endRun(at: index)
                    connection.inboundDropped(envelope)
                    sessionControl(control, on: connection, from: peer)
                    continue
                }
            }
            let isResource = envelope.type.hasPrefix(EnvelopeType.resourcePrefix)
            guard isResource || EnvelopeType.passedUp.contains(envelope.type) else {
                run = run.lowerBound..<index + 1
                continue
            }
            endRun(at: index)
            if isResource {
                resourcesBox.withLockedValue { $0 }?.received(envelope, from: peer, on: connection)
            } else {
                // A feature's control frame goes through the event queue, so that the layer above
                // sees it after the peer connected and before it disconnected; dropped once it
                // disconnected.
                withState { state in
                    guard state.running, state.peers[peer.id]?.active != nil else { return }
                    state.queue(.control(envelope, from: peer, on: connection))
                }
            }
        }
        take(envelopes[run], numbered: numbers, from: peer, on: connection)
    }

    /// Takes in `frames`, frames for handlers from one read burst, with one lock: each is
    /// numbered by the peer's session (when `numbered` and it carries a number), held (the peer
    /// may still be writing on a tie-break's loser, and what it wrote there comes first) or
    /// handed to the dispatcher, which takes them with one lock too; then acknowledges them. A
    /// frame that breaks the session's protocol fails the connection, and those after it are
    /// taken in as they would be had they come alone.
    private func take(_ frames: ArraySlice<Envelope>, numbered: Bool, from peer: Peer, on connection: PeerConnection) {
        var start = frames.startIndex
        while start < frames.endIndex {
            let first = start
            // What goes to the dispatcher: `frames[first..<end]` while every frame goes, else a copy.
            var end = first
            var copy: [Envelope]?
            var dropped: [Envelope] = []
            var acknowledge: UInt64?
            var armTimer = false
            var violation: (envelope: Envelope, reason: String)?
            start = withState { state -> Int in
                // In place: the record is not copied (see PeerRecord.recordInSession).
                let record = state.peers.index(forKey: peer.id)
                for position in first..<frames.endIndex {
                    // `frames[position]` in place, not bound to a name: see connection(_:received:).
                    let outcome: PeerRecord.Numbered?  // nil: held
                    switch (numbered && SessionFrame.isNumbered(frames[position]), record) {
                    case (true, nil):
                        outcome = .drop
                    case let (true, record?):
                        let bytes = PeerRecord.sessionBytes(of: frames[position])
                        let (numberedOutcome, held) = state.peers.values[record].receiveNumbered(frames[position], bytes: bytes, on: connection)
                        outcome = held ? nil : numberedOutcome
                    case (false, nil):
                        outcome = .deliver(acknowledge: nil, armTimer: false)
                    case let (false, record?):
                        let held = state.peers.values[record].holdInbound(frames[position], on: connection)
                        outcome = held ? nil : .deliver(acknowledge: nil, armTimer: false)
                    }
                    if case let .deliver(acknowledged, arm) = outcome {
                        if copy == nil { end = position + 1 } else { copy?.append(frames[position]) }
                        acknowledge = acknowledged ?? acknowledge
                        armTimer = armTimer || arm
                        continue
                    }
                    if copy == nil { copy = Array(frames[first..<end]) }
                    if case .drop = outcome { dropped.append(frames[position]) }
                    if case let .violation(reason) = outcome {
                        violation = (frames[position], reason)
                        return position + 1
                    }
                }
                return frames.endIndex
            }
            let handed = copy.map { $0[...] } ?? frames[first..<end]
            if !handed.isEmpty { messagesBox.withLockedValue { $0 }?.enqueue(handed, from: peer, on: connection) }
            // Each acknowledgement counts every frame before it: the latest says all.
            if let acknowledge { connection.send(SessionFrame.ack(received: acknowledge).encode()) }
            if armTimer { armAcknowledgementTimer(for: peer.id) }
            for envelope in dropped { connection.inboundDropped(envelope) }
            if let violation {
                connection.inboundDropped(violation.envelope)
                connection.fail(violation.reason)
            }
        }
    }

    func connection(_ connection: PeerConnection, received chunk: ResourceChunk) {
        // A chunk needs an accepted offer, which the admission hook's hold never lets through.
        guard let peer = connection.peer else { return }
        resourcesBox.withLockedValue { $0 }?.received(chunk, from: peer, on: connection)
    }

    func connectionClosed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason) {
        // A pending handshake closed to make room for another was counted, and is not news.
        let evicted = connection.remote == nil && wasEvicted(connection)
        if !evicted { count(reason) }
        let error = reason.error(peer: connection.description)
        // A wrong key, a plaintext peer meeting a TLS one, a refusal by the admission hook: not
        // redialled until the peer is discovered again, and logged once per host, kind and episode.
        let refused = error?.isSecurityRefusal == true
        // But a TLS handshake that the peer cut off without an alert (`securityHandshakeFailed`:
        // it reset or closed the connection) is no verdict on our key, since a peer with another
        // key says so with an alert. It was busy (its pending handshakes at their limit, see
        // HandshakeSlots: ten clients dialling one daemon at once from one address) or
        // restarting, so a dial of ours is retried with back-off, as a failed dial is. Waiting for
        // the peer to be discovered again left it unreachable for as long as it stayed advertised.
        let retriesDial = refused && connection.direction == .outbound && error?.code == .securityHandshakeFailed
        // A stranger's refusals are reported (logged and published) once per remote host, kind
        // (code) and episode: an attacker re-opening connections gets neither a log line nor an
        // event per connection, and a subscriber that reads slowly holds no event per connection
        // either.
        // Our own dials are refused at most once per discovery of the peer: each is reported.
        // A dial retried after an interrupted handshake is reported once per episode, as a
        // stranger's refusal is, not once per redial.
        let reportRefusal = refused && !evicted && error.map { error in
            (connection.direction == .outbound && !retriesDial) || configuration.security.shouldLog(error, remote: connection.remoteDescription)
        } == true
        var armSwitch: (peerID: String, generation: Int)?
        var armWindow: (peerID: String, generation: Int)?
        var suspendedAgain = false
        let redialKey = withState { state -> String? in
            let id = ObjectIdentifier(connection)
            state.connections[id] = nil
            state.pendingHandshakes.completed(ObjectIdentifier(connection.channel))
            guard state.running else { return nil }
            if reportRefusal, let error { state.emit(.error(error)) }
            guard let remote = connection.remote else {
                // Closed before its handshake completed: a failed dial, or a stranger.
                return refused && !retriesDial ? nil : connection.serviceKey
            }
            guard var record = state.peers[remote.peerID] else { return nil }
            record.inboundNext[ObjectIdentifier(connection)] = nil
            state.peers[remote.peerID] = record
            switch record.link.closed(connection, byeDuplicate: reason == .peerSaidBye(reason: Bye.duplicateConnection), charge: { newBudgetShare() }) {
            case .ignored:
                // A tie-break's loser (or a connection never used): nothing changes for the peer.
                break
            case let .switching(generation):
                // The peer kept another connection to us; it is being established.
                state.peers[remote.peerID] = record
                armSwitch = (remote.peerID, generation)
            case .disconnected:
                // Suspended (feature resume) or disconnected: PeerLoss decides, this carries it out.
                switch PeerLoss.connectionClosed(reason, direction: connection.direction, session: record.session, peerDialsUs: record.dialsUs, refused: refused) {
                case let .suspend(heardUsLate):
                    if let generation = suspend(&record, reason: error, heardUsLate: heardUsLate, state: &state) {
                        armWindow = (remote.peerID, generation)
                    } else {
                        suspendedAgain = true
                    }
                case let .disconnect(redial):
                    if let error { state.rememberFailure(error, of: remote.peerID) }
                    carryOut(record.dropSession(error ?? .connectionClosed(peer: record.peer.name)), state: &state)
                    disconnected(&record, reason: error, state: &state)
                    if redial, state.peers[remote.peerID] != nil { scheduleRedial(record.serviceKeys, state: &state) }
                }
            }
            return nil
        }
        if let (peerID, generation) = armSwitch {
            let timer = configuration.clock.schedule(on: timerLoop, in: .nanoseconds(configuration.handshakeTimeout.nanoseconds)) {
                self.switchGraceExpired(peerID: peerID, generation: generation)
            }
            let armed = state.withLockedValue { state -> Bool in
                guard var record = state.peers[peerID], record.link.isSwitching else { return false }
                record.switchTimer = (generation, timer)
                state.peers[peerID] = record
                return true
            }
            if !armed { timer.cancel() }
        }
        if let (peerID, generation) = armWindow, let sessions = configuration.sessions {
            armWindowTimer(peerID: peerID, generation: generation)
            // The timeout's own sentence says "… and was disconnected", which a suspended peer is not.
            let cause = error?.code == .peerTimedOut ? "it did not answer for \(Duration.nanoseconds(configuration.peerTimeout.nanoseconds).peerKitSeconds)"
                : error?.description ?? "its connection closed"
            logger.notice("\(connection) is unreachable (\(cause)); it stays connected for \(sessions.window.peerKitSeconds) (PeerConfiguration.sessionResumeWindow) while it is redialled, and what is sent to it waits, up to \(sessions.maximumUnacknowledgedBytes) bytes.")
            return
        }
        if suspendedAgain {
            // A connection that died before the peer resumed on it: the window set when the peer
            // was first suspended still runs.
            let cause = error?.code == .peerTimedOut ? "it did not answer for \(Duration.nanoseconds(configuration.peerTimeout.nanoseconds).peerKitSeconds)"
                : error?.description ?? "its connection closed"
            logger.notice("\(connection) is unreachable again before it resumed (\(cause)); it stays connected within its resume window while it is redialled.")
        } else if let redialKey {
            // A dial whose handshake failed: the back-off logs the episode once (and publishes its
            // error, unless it was published as a refusal above).
            dialFailed(key: redialKey, reason: error?.description ?? "the connection closed during the handshake", error: reportRefusal ? nil : error)
        } else if let error, refused, !evicted {
            let log = connection.direction == .outbound ? configuration.security.shouldLog(error, remote: connection.remoteDescription) : reportRefusal
            if log { logger.notice("\(error)") }
        } else if let error, connection.remote != nil {
            // An established connection that ended badly.
            logger.notice("\(error)")
        } else if let error, connection.direction == .inbound {
            // A stranger that failed its handshake: counted, and logged once per episode.
            handshakeFailed(connection, reason: reason, error: error)
        }
    }

    /// Counts a connection that ended other than in order as refused or dropped.
    private func count(_ reason: ConnectionStateMachine.CloseReason) {
        let metrics = configuration.metrics
        switch reason {
        case .stopped, .duplicate, .peerSaidBye:
            break
        case let .refused(error, _):
            metrics.refused(error.code == .admissionRefused ? .admission : .security)
        case let .failed(failure):
            switch failure {
            case .handshake: metrics.dropped(.handshakeFailed)
            case .malformed: metrics.dropped(.malformed)
            case .frameTooLarge: metrics.dropped(.frameTooLarge)
            case .timedOut: metrics.dropped(.timedOut)
            case .tooSlow, .overOutboundBudget: metrics.dropped(.tooSlow)
            case .limitExceeded: metrics.dropped(.limitExceeded)
            case .peerIDNotBound: metrics.refused(.security)
            }
        case .peerFailed:
            metrics.dropped(.peerError)
        case .connectionLost:
            metrics.dropped(.connectionLost)
        case .transportError:
            metrics.dropped(.transportError)
        }
    }

    /// The winner of a tie-break did not arrive within the grace period: the peer is disconnected.
    /// With a session (feature resume), the peer is suspended instead, as when its connection
    /// dies: what waited for the winner stays in the session and goes out once it is back.
    private func switchGraceExpired(peerID: String, generation: Int) {
        var armWindow: (generation: Int, name: String)?
        let waiters = withState { state -> [CheckedContinuation<Void, Never>] in
            guard state.running, var record = state.peers[peerID],
                  let waiters = record.link.graceExpired(generation: generation) else { return [] }
            record.switchTimer = nil
            let reason = Self.winnerNeverArrived(peer: record.peer.name, within: configuration.handshakeTimeout)
            switch PeerLoss.winnerNeverArrived(session: record.session) {
            case .suspend:
                armWindow = suspend(&record, reason: reason, state: &state).map { ($0, record.peer.name) }
            case let .disconnect(redial):
                disconnected(&record, reason: reason, state: &state)
                if redial, state.peers[peerID] != nil { scheduleRedial(record.serviceKeys, state: &state) }
            }
            return waiters
        }
        if let armWindow {
            armWindowTimer(peerID: peerID, generation: armWindow.generation)
            logger.notice("The connection to \"\(LogSafe.text(armWindow.name, maximumBytes: 80))\" that won the tie-break did not complete its handshake within \(Duration.nanoseconds(configuration.handshakeTimeout.nanoseconds).peerKitSeconds) (PeerConfiguration.handshakeTimeout); the peer is suspended while it is redialled.")
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Why a peer whose tie-break winner did not arrive is suspended or disconnected: the real
    /// cause, not a connection that "closed unexpectedly" (it closed on the peer's own bye).
    static func winnerNeverArrived(peer name: String, within timeout: TimeAmount) -> PeerKitError {
        .handshakeFailed(reason: "its connection that won the tie-break did not complete the handshake within \(Duration.nanoseconds(timeout.nanoseconds).peerKitSeconds) (PeerConfiguration.handshakeTimeout)",
                         peer: "\"\(LogSafe.text(name, maximumBytes: 80))\"")
    }

    /// Suspends `record`'s peer (feature resume): reported ``PeerEvent/peerSuspended(_:reason:)``,
    /// still connected for the user, and redialled every ``suspendedPeerRedialInterval``. Returns
    /// the generation of the resume window's timer to arm (``armWindowTimer(peerID:generation:)``,
    /// outside the lock). Call with the lock held; it only changes state.
    private func suspend(_ record: inout PeerRecord, reason: PeerKitError?, heardUsLate: Bool = false, state: inout State) -> Int? {
        let generation = record.suspend()
        state.emit(.peerSuspended(record.snapshot, reason: reason))
        state.peers[record.peer.id] = record
        scheduleRedial(record.serviceKeys, heardUsLate: heardUsLate, state: &state)
        return generation
    }

    /// Arms a suspended peer's resume window; call without the lock. A peer back (or gone)
    /// before the timer is stored has its timer cancelled at once.
    private func armWindowTimer(peerID: String, generation: Int) {
        guard let sessions = configuration.sessions else { return }
        let timer = configuration.clock.schedule(on: timerLoop, in: sessions.window) {
            self.windowExpired(peerID: peerID, generation: generation)
        }
        let armed = state.withLockedValue { state -> Bool in
            guard var record = state.peers[peerID], record.windowTimerArmed(timer, generation: generation) else { return false }
            state.peers[peerID] = record
            return true
        }
        if !armed { timer.cancel() }
    }

    /// Reports `record`'s peer disconnected (its state machine is idle now), and removes it
    /// unless discovery still knows it. Call with the lock held; it only changes state.
    func disconnected(_ record: inout PeerRecord, reason: PeerKitError?, state: inout State) {
        let peerID = record.peer.id
        state.droppedInbound += record.heldInbound.map { ($0.envelope, $0.connection) }
        record.heldInbound = []
        state.emit(.peerDisconnected(record.snapshot, reason: reason))
        if record.serviceKeys.isEmpty {
            state.peers[peerID] = nil
            state.emit(.peerRemoved(record.snapshot))
        } else {
            state.peers[peerID] = record
        }
        state.emit(.availablePeersChanged(Self.available(state)))
    }

    /// A tie-break's loser finished closing: when it was the last, the messages held on the
    /// winner are handed on.
    private func retiredConnectionFinished(_ connection: PeerConnection, of peerID: String) {
        let release = state.withLockedValue { state -> Bool in
            guard var record = state.peers[peerID] else { return false }
            defer { state.peers[peerID] = record }
            return record.link.finished(connection) && !record.heldInbound.isEmpty
        }
        if release { releaseInbound(of: peerID) }
    }

    /// The last tie-break loser of `peerID` closed: hands on the messages that waited on the
    /// winner, in order; messages arriving meanwhile join them, so nothing overtakes them.
    private func releaseInbound(of peerID: String) {
        let sink = messagesBox.withLockedValue { $0 }
        while true {
            var armTimer = false
            var violations: [(PeerConnection, String)] = []
            let held = state.withLockedValue { state -> [(envelope: Envelope, connection: PeerConnection, deliver: Bool)]? in
                guard var record = state.peers[peerID] else { return nil }
                defer { state.peers[peerID] = record }
                guard !record.heldInbound.isEmpty else {
                    record.releasingInbound = false
                    return nil
                }
                record.releasingInbound = true
                defer { record.heldInbound = [] }
                return record.heldInbound.map { held in
                    guard let sequence = held.sequence else { return (held.envelope, held.connection, true) }
                    switch record.takeNumbered(sequence, of: held.envelope) {
                    case let .deliver(_, arm):
                        armTimer = armTimer || arm
                        return (held.envelope, held.connection, true)
                    case .drop:
                        return (held.envelope, held.connection, false)
                    case let .violation(reason):
                        violations.append((held.connection, reason))
                        return (held.envelope, held.connection, false)
                    }
                }
            }
            guard let held else { return }
            if armTimer { armAcknowledgementTimer(for: peerID) }
            for (connection, reason) in violations { connection.fail(reason) }
            for (envelope, connection, deliver) in held {
                if deliver, let sink, let peer = connection.peer {
                    sink.enqueue(envelope, from: peer, on: connection)
                } else {
                    connection.inboundDropped(envelope)
                }
            }
        }
    }
}
