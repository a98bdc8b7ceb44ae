import NIOCore
import Testing
@testable import PeerKit

/// What a ``PeerRecord`` decides about its peer's resumable session, with plain values: no
/// sockets, no clock. Connections are plain objects, timers and waiters plain values; each test
/// drives the record through the calls the ``ConnectionManager`` makes, in its order.
@Suite("Peer record (sessions, no I/O)")
struct PeerRecordTests {
    typealias Connection = NamedConnection

    struct Timer: Equatable {
        let name: String
    }

    typealias Record = PeerRecord<Connection, Timer, String>

    /// "a" (this side) is smaller than "b" (the peer): the connection a dialled wins a tie-break.
    static let local = "a", remote = "b"

    func frame(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    func message(_ text: String = "hello") -> Envelope { Envelope(type: "m", payload: ByteBuffer(string: "\"\(text)\"")) }

    func newRecord() -> Record { Record(peer: Peer(id: Self.remote, name: "B", isConnected: false)) }

    /// A connection of `incarnation` arrives, the way ``ConnectionManager`` handles a completed
    /// handshake: the session first, then the link, then the resume to send on it.
    @discardableResult
    func arrive(_ record: inout Record, _ connection: Connection, direction: TieBreak.Direction = .outbound, incarnation: String? = "b1",
                fingerprint: String? = nil, limit: Int = 100) -> (arrival: Record.SessionArrival, resume: SessionFrame.Resume?) {
        let arrival = record.sessionArrives(incarnation: incarnation, fingerprint: fingerprint, maximumUnacknowledgedBytes: limit, maximumQueuedOutboundBytes: 1_000_000, perFrameOverhead: 0)
        _ = record.link.established(connection, direction: direction, localPeerID: Self.local, remotePeerID: Self.remote)
        return (arrival, record.sessionConnected(connection))
    }

    /// A record connected on `connection`, its session resumed by the peer (nothing received either way).
    func resumedRecord(on connection: Connection, limit: Int = 100) -> Record {
        var record = newRecord()
        arrive(&record, connection, limit: limit)
        let outcome = record.sessionControl(.resume(received: 0), on: connection)
        #expect(outcome.writesSession)
        #expect(record.session?.phase == .active)
        _ = record.takeSessionWrites()
        return record
    }

    /// The record's connection `connection` died as a network fails: the link is idle and the
    /// session suspended; returns the window generation to arm.
    func lose(_ record: inout Record, _ connection: Connection) -> Int? {
        #expect(record.link.closed(connection, byeDuplicate: false) == .disconnected)
        return record.suspend()
    }

    /// A record whose session is full (10 bytes unacknowledged, a sender waiting) and whose
    /// `connection` died: suspended, its window timer armed for generation 1. With
    /// `resendFrom`, the peer had sent its `peerkit.resend` on it first.
    func suspendedFull(on connection: Connection, resendFrom: Bool) -> Record {
        var record = resumedRecord(on: connection, limit: 10)
        _ = record.recordInSession(frame("0123456789"))
        #expect(record.session?.wait("sender") == .waiting)
        if resendFrom { _ = record.sessionControl(.resend(from: 1), on: connection) }
        #expect(lose(&record, connection) == 1)
        let armed = record.windowTimerArmed(Timer(name: "window"), generation: 1)
        #expect(armed)
        return record
    }

    /// A resumed record that received the peer's session frames 1 and 2 on `connection`.
    func receivedTwo(on connection: Connection) -> Record {
        var record = resumedRecord(on: connection)
        _ = record.sessionControl(.resend(from: 1), on: connection)
        #expect(record.receiveNumbered(message(), on: connection).outcome != .drop)
        #expect(record.receiveNumbered(message(), on: connection).outcome != .drop)
        return record
    }

    // MARK: A connection arrives

    @Test("the first connection of a peer with the feature starts a session bounded by the lower of the two limits")
    func firstConnectionStartsSession() {
        var record = newRecord()
        let c = Connection("c")
        let (arrival, resume) = arrive(&record, c, fingerprint: "f1", limit: 2_000_000)
        #expect(!arrival.resumes)
        #expect(arrival.ended == nil)
        #expect(arrival.event == nil)
        #expect(record.session?.remoteIncarnation == "b1")
        #expect(record.session?.fingerprint == "f1")
        // The outbox's limit (1,000,000) is lower than the session's: it bounds the session.
        #expect(record.session?.limits.maximumUnacknowledgedBytes == 1_000_000)
        #expect(record.session?.phase == .resuming(generation: 0))
        #expect(resume == SessionFrame.Resume(received: 0, epoch: record.session?.epoch, peerEpoch: nil))

        var lower = newRecord()
        arrive(&lower, Connection("d"), limit: 300)
        #expect(lower.session?.limits.maximumUnacknowledgedBytes == 300)

        // A peer without the feature: no session, and no resume to send.
        var plain = newRecord()
        let (plainArrival, plainResume) = arrive(&plain, Connection("e"), incarnation: nil)
        #expect(plain.session == nil)
        #expect(plainArrival.ended == nil)
        #expect(plainResume == nil)
    }

    @Test("the same run of the peer coming back after a reconnect continues its session, and resumes")
    func sessionContinuesAcrossReconnect() {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = resumedRecord(on: c1)
        let epoch = record.session?.epoch
        _ = record.recordInSession(frame("one"))
        #expect(lose(&record, c1) == 1)
        #expect(record.isConnected)
        let armed = record.windowTimerArmed(Timer(name: "window"), generation: 1)
        #expect(armed)

        let (arrival, resume) = arrive(&record, c2)
        #expect(arrival.resumes)
        #expect(arrival.ended == nil)
        #expect(arrival.event == nil)
        #expect(record.session?.epoch == epoch)
        #expect(record.session?.unacknowledgedCount == 1)
        #expect(record.session?.phase == .resuming(generation: 1))
        #expect(resume?.received == 0)

        // The peer's resume on the new connection: the window's timer is cancelled, and the frame
        // it did not get goes out again, numbered.
        let outcome = record.sessionControl(.resume(received: 0), on: c2)
        #expect(outcome.writesSession)
        #expect(outcome.resending == 1)
        #expect(outcome.windowTimer == Timer(name: "window"))
        #expect(outcome.violation == nil)
        #expect(outcome.restart == nil)
        #expect(record.windowTimer == nil)
        let writes = record.takeSessionWrites()
        #expect(writes?.connection === c2)
        #expect(writes?.writes.from == 1)
        #expect(writes?.writes.frames.map { String(buffer: $0) } == ["one"])
    }

    @Test("a second connection of the same run while connected keeps the session and does not resume")
    func sameRunWhileConnected() {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = resumedRecord(on: c1)
        let epoch = record.session?.epoch
        // Seen from "a", the peer's own dial (inbound here) loses to the existing outbound one.
        let arrival = record.sessionArrives(incarnation: "b1", fingerprint: nil, maximumUnacknowledgedBytes: 100, maximumQueuedOutboundBytes: 1_000_000, perFrameOverhead: 0)
        #expect(!arrival.resumes)
        #expect(arrival.ended == nil)
        #expect(record.session?.epoch == epoch)
        #expect(record.session?.phase == .active)
        _ = record.link.established(c2, direction: .inbound, localPeerID: Self.local, remotePeerID: Self.remote)
        #expect(record.link.current === c1)
    }

    @Test("a restarted peer that was suspended: its old session ends, waiters resume with peerRestarted, and it is reported disconnected")
    func restartedWhileSuspended() {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = suspendedFull(on: c1, resendFrom: true)
        let oldEpoch = record.session?.epoch

        let (arrival, resume) = arrive(&record, c2, incarnation: "b2")
        #expect(!arrival.resumes)
        #expect(arrival.ended?.error.code == .peerRestarted)
        #expect(arrival.ended?.waiters == ["sender"])
        #expect(arrival.ended?.windowTimer == Timer(name: "window"))
        guard case let .peerDisconnected(peer, reason)? = arrival.event else {
            Issue.record("not reported disconnected: \(String(describing: arrival.event))")
            return
        }
        #expect(peer.id == Self.remote)
        #expect(!peer.isConnected)
        #expect(reason?.code == .peerRestarted)
        // A new session, with nothing of the old one.
        #expect(record.session?.remoteIncarnation == "b2")
        #expect(record.session?.epoch != oldEpoch)
        #expect(record.session?.unacknowledgedCount == 0)
        #expect(record.windowTimer == nil)
        #expect(record.inboundNext.isEmpty)
        #expect(resume?.received == 0)
    }

    @Test("a restarted peer that was still connected: its old session ends without a disconnect")
    func restartedWhileConnected() {
        let c1 = Connection("c1")
        var record = resumedRecord(on: c1, limit: 10)
        _ = record.recordInSession(frame("0123456789"))
        #expect(record.session?.wait("sender") == .waiting)
        let arrival = record.sessionArrives(incarnation: "b2", fingerprint: nil, maximumUnacknowledgedBytes: 10, maximumQueuedOutboundBytes: 1_000_000, perFrameOverhead: 0)
        #expect(!arrival.resumes)
        #expect(arrival.event == nil)
        #expect(arrival.ended?.error.code == .peerRestarted)
        #expect(arrival.ended?.waiters == ["sender"])
        #expect(arrival.ended?.windowTimer == nil)
        #expect(record.session?.remoteIncarnation == "b2")
    }

    @Test("another key, or no session offered, ends the session; without an offer none starts")
    func anotherKeyOrNoOffer() {
        let c1 = Connection("c1")
        var record = newRecord()
        arrive(&record, c1, fingerprint: "f1")
        let epoch = record.session?.epoch
        let rekeyed = record.sessionArrives(incarnation: "b1", fingerprint: "f2", maximumUnacknowledgedBytes: 100, maximumQueuedOutboundBytes: 1_000_000, perFrameOverhead: 0)
        #expect(rekeyed.ended?.error.code == .peerRestarted)
        #expect(record.session?.fingerprint == "f2")
        #expect(record.session?.epoch != epoch)

        let plain = record.sessionArrives(incarnation: nil, fingerprint: "f2", maximumUnacknowledgedBytes: 100, maximumQueuedOutboundBytes: 1_000_000, perFrameOverhead: 0)
        #expect(plain.ended?.error.code == .peerRestarted)
        #expect(!plain.resumes)
        #expect(record.session == nil)
    }

    @Test("a connection that is not the peer's current one gets a resume saying what arrived, and the session does not restart on it")
    func resumeOnTieBreakLoser() {
        let c1 = Connection("c1"), loser = Connection("loser")
        var record = receivedTwo(on: c1)
        guard case let .retire(retired, _) = record.link.established(loser, direction: .inbound, localPeerID: Self.local, remotePeerID: Self.remote) else {
            Issue.record("no tie-break")
            return
        }
        #expect(retired === loser)
        #expect(record.sessionConnected(loser) == SessionFrame.Resume(received: 2, epoch: record.session?.epoch, peerEpoch: nil))
        #expect(record.session?.phase == .active)

        var plain = newRecord()
        arrive(&plain, c1, incarnation: nil)
        #expect(plain.sessionConnected(c1) == nil)
    }

    // MARK: The peer's control frames

    @Test("a resume on the current connection names a count never sent: a violation, and nothing is written")
    func resumeInvalid() {
        let c = Connection("c")
        var record = newRecord()
        arrive(&record, c)
        let outcome = record.sessionControl(.resume(received: 5), on: c)
        #expect(outcome.violation == "it resumed having received 5 session frames, but only 0 were sent to it")
        #expect(!outcome.writesSession)
        #expect(outcome.windowTimer == nil)
        #expect(record.session?.phase == .resuming(generation: 0))
    }

    @Test("a peer that ended its side of the session resumes with a new epoch: the session restarts, reporting the frames that may be lost")
    func resumeRestarted() throws {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = newRecord()
        arrive(&record, c1, limit: 10)
        let ours = try #require(record.session?.epoch)
        #expect(record.sessionControl(.resume(SessionFrame.Resume(received: 0, epoch: "p1", peerEpoch: ours)), on: c1).writesSession)
        _ = record.takeSessionWrites()
        // Written on c1 and never acknowledged; it fills the session, so a sender waits.
        #expect(record.recordInSession(frame("0123456789"))?.writes?.frames.count == 1)
        #expect(record.session?.wait("sender") == .waiting)
        #expect(lose(&record, c1) == 1)
        let armed = record.windowTimerArmed(Timer(name: "window"), generation: 1)
        #expect(armed)
        #expect(arrive(&record, c2).arrival.resumes)

        let outcome = record.sessionControl(.resume(SessionFrame.Resume(received: 0, epoch: "p2", peerEpoch: nil)), on: c2)
        #expect(outcome.writesSession)
        #expect(outcome.waiters == ["sender"])
        #expect(outcome.windowTimer == Timer(name: "window"))
        #expect(outcome.violation == nil)
        let restart = try #require(outcome.restart)
        #expect(restart.lostFrames == 1)
        #expect(restart.lostBytes == 10)
        #expect(restart.peer.id == Self.remote)
        #expect(restart.peer.isConnected)
        #expect(restart.reason.code == .peerEndedSession)
        #expect(restart.reason.lostMessages == 1)
        #expect(record.session?.unacknowledgedCount == 0)
        #expect(record.session?.peerEpoch == "p2")
        #expect(record.windowTimer == nil)
    }

    @Test("a resume on a connection that is not the peer's current one acknowledges, and resumes waiting senders")
    func resumeElsewhereAcknowledges() {
        let c1 = Connection("c1"), other = Connection("other")
        var record = resumedRecord(on: c1, limit: 10)
        _ = record.recordInSession(frame("aaaaa"))
        _ = record.recordInSession(frame("bbbbb"))
        #expect(record.session?.wait("sender") == .waiting)
        let outcome = record.sessionControl(.resume(received: 1), on: other)
        #expect(!outcome.writesSession)
        #expect(outcome.waiters == ["sender"])
        #expect(outcome.violation == nil)
        #expect(record.session?.acknowledged == 1)
        #expect(record.session?.unacknowledgedCount == 1)

        // Once resumed, a resume on the current connection too is taken as an acknowledgement.
        let again = record.sessionControl(.resume(received: 2), on: c1)
        #expect(!again.writesSession)
        #expect(again.violation == nil)
        #expect(record.session?.acknowledged == 2)

        // One naming more than was sent is a violation.
        let invalid = record.sessionControl(.resume(received: 9), on: other)
        #expect(invalid.violation == "it acknowledged 9 session frames, but only 2 were sent to it")
    }

    @Test("an acknowledgement frees what it covers; a repeated one is stale; one beyond what was sent is a violation")
    func acknowledgements() {
        let c = Connection("c")
        var record = resumedRecord(on: c, limit: 10)
        _ = record.recordInSession(frame("aaaaa"))
        _ = record.recordInSession(frame("bbbbb"))
        #expect(record.session?.wait("sender") == .waiting)

        let freed = record.sessionControl(.ack(received: 1), on: c)
        #expect(freed.waiters == ["sender"])
        #expect(freed.violation == nil)
        #expect(!freed.writesSession)
        #expect(record.session?.unacknowledgedBytes == 5)

        let stale = record.sessionControl(.ack(received: 1), on: c)
        #expect(stale.waiters.isEmpty)
        #expect(stale.violation == nil)
        #expect(record.session?.unacknowledgedBytes == 5)

        let invalid = record.sessionControl(.ack(received: 3), on: c)
        #expect(invalid.violation == "it acknowledged 3 session frames, but only 2 were sent to it")
        #expect(record.session?.unacknowledgedBytes == 5)
    }

    @Test("a resend names the peer's next frame on its connection; one naming frame 0 is a violation")
    func resend() {
        let c = Connection("c")
        var record = resumedRecord(on: c)
        let zero = record.sessionControl(.resend(from: 0), on: c)
        #expect(zero.violation == "its peerkit.resend names session frame 0, and they are numbered from 1")
        #expect(record.inboundNext[ObjectIdentifier(c)] == nil)

        let five = record.sessionControl(.resend(from: 5), on: c)
        #expect(five.violation == nil)
        #expect(!five.writesSession)
        #expect(record.inboundNext[ObjectIdentifier(c)] == 5)
    }

    @Test("without a session, control frames change nothing")
    func controlWithoutSession() {
        let c = Connection("c")
        var record = newRecord()
        arrive(&record, c, incarnation: nil)
        let outcome = record.sessionControl(.resend(from: 1), on: c)
        #expect(outcome.violation == nil)
        #expect(!outcome.writesSession)
        #expect(record.inboundNext.isEmpty)
        #expect(record.session == nil)
    }

    // MARK: The peer's numbered frames

    @Test("a numbered frame before the connection's resend is a violation; without a session it is dropped")
    func numberedBeforeResend() {
        let c = Connection("c")
        var record = resumedRecord(on: c)
        let (outcome, held) = record.receiveNumbered(message(), on: c)
        #expect(outcome == .violation("it sent a message before peerkit.resend on a connection with the resume feature"))
        #expect(!held)

        var plain = newRecord()
        arrive(&plain, c, incarnation: nil)
        let (dropped, plainHeld) = plain.receiveNumbered(message(), on: c)
        #expect(dropped == .drop)
        #expect(!plainHeld)
    }

    @Test("numbered frames after a resend are delivered in order, the first arming the acknowledgement timer")
    func numberedDelivered() {
        let c = Connection("c")
        var record = resumedRecord(on: c)
        _ = record.sessionControl(.resend(from: 1), on: c)
        #expect(record.receiveNumbered(message(), on: c) == (.deliver(acknowledge: nil, armTimer: true), false))
        #expect(record.receiveNumbered(message(), on: c) == (.deliver(acknowledge: nil, armTimer: false), false))
        #expect(record.inboundNext[ObjectIdentifier(c)] == 3)
        #expect(record.session?.received == 2)
    }

    @Test("frames received again on a new connection are dropped as duplicates; the next one is delivered")
    func duplicatesDropped() {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = receivedTwo(on: c1)
        // The peer resends from 2 on another connection: 2 arrived already.
        _ = record.sessionControl(.resend(from: 2), on: c2)
        #expect(record.receiveNumbered(message(), on: c2) == (.drop, false))
        #expect(record.session?.received == 2)
        #expect(record.receiveNumbered(message(), on: c2) == (.deliver(acknowledge: nil, armTimer: false), false))
        #expect(record.session?.received == 3)
    }

    @Test("a frame numbered beyond the next one is a gap: a violation")
    func gap() {
        let c = Connection("c")
        var record = resumedRecord(on: c)
        _ = record.sessionControl(.resend(from: 3), on: c)
        #expect(record.receiveNumbered(message(), on: c) == (.violation("its session frame 3 came after 0: frames are missing between them"), false))
        #expect(record.session?.received == 0)
    }

    @Test("session frames on a tie-break's winner are taken at once, the loser's late copies dropped; they wait only behind held frames")
    func numberedOnWinnerNotHeld() {
        let loser = Connection("in"), winner = Connection("out")
        var record = newRecord()
        arrive(&record, loser, direction: .inbound)
        _ = record.sessionControl(.resume(received: 0), on: loser)
        _ = record.sessionControl(.resend(from: 1), on: loser)
        #expect(record.receiveNumbered(message("1"), on: loser) == (.deliver(acknowledge: nil, armTimer: true), false))
        // Seen from "a", the connection it dialled wins: the first one retires.
        guard case .retire = record.link.established(winner, direction: .outbound, localPeerID: Self.local, remotePeerID: Self.remote) else {
            Issue.record("no tie-break")
            return
        }
        #expect(record.link.holdsInbound(from: winner))
        // The peer had our resume on the winner (1 received): it resends from 2 there, and the
        // frames are taken while the loser is still open.
        _ = record.sessionControl(.resend(from: 2), on: winner)
        #expect(record.receiveNumbered(message("2"), on: winner) == (.deliver(acknowledge: nil, armTimer: false), false))
        #expect(record.receiveNumbered(message("3"), on: winner) == (.deliver(acknowledge: nil, armTimer: false), false))
        #expect(record.heldInbound.isEmpty)
        // Frames 2 and 3, written on the loser before the peer switched, arrive after them:
        // duplicates. The loser's next frame would be 4, the next one: never a gap.
        #expect(record.receiveNumbered(message("2"), on: loser) == (.drop, false))
        #expect(record.receiveNumbered(message("3"), on: loser) == (.drop, false))
        #expect(record.session?.received == 3)
        #expect(record.inboundNext[ObjectIdentifier(loser)] == 4)

        // Behind a frame held without a number, session frames wait too, with their numbers.
        let notice = record.holdInbound(message("unnumbered"), on: winner)
        #expect(notice)
        #expect(record.receiveNumbered(message("4"), on: winner) == (.drop, true))
        #expect(record.heldInbound.map(\.sequence) == [nil, 4])
        #expect(record.session?.received == 3)

        // The loser closed and the held frames were handed on: later ones are taken at once, or
        // join what is still being handed on.
        let last = record.link.finished(loser)
        #expect(last)
        #expect(record.takeNumbered(4, of: message("4")) == .deliver(acknowledge: nil, armTimer: false))
        record.heldInbound = []
        #expect(record.receiveNumbered(message("5"), on: winner) == (.deliver(acknowledge: nil, armTimer: false), false))
        record.releasingInbound = true
        #expect(record.receiveNumbered(message("6"), on: winner) == (.drop, true))
        #expect(record.heldInbound.first?.sequence == 6)
    }

    @Test("frames without a number on a tie-break's winner are held, without a number, until the loser has closed, and join held frames being handed on")
    func unnumberedHeldWhileLinkHoldsInbound() {
        let loser = Connection("in"), winner = Connection("out")
        var record = newRecord()
        arrive(&record, loser, direction: .inbound)
        let onLoser = record.holdInbound(message("on the loser"), on: loser)
        #expect(!onLoser)
        guard case .retire = record.link.established(winner, direction: .outbound, localPeerID: Self.local, remotePeerID: Self.remote) else {
            Issue.record("no tie-break")
            return
        }
        let first = record.holdInbound(message("first"), on: winner)
        #expect(first)
        #expect(record.heldInbound.count == 1)
        #expect(record.heldInbound.first?.connection === winner)
        #expect(record.heldInbound.first?.sequence == nil)

        let last = record.link.finished(loser)
        #expect(last)
        record.heldInbound = []
        let second = record.holdInbound(message("second"), on: winner)
        #expect(!second)
        #expect(record.heldInbound.isEmpty)
        record.releasingInbound = true
        let third = record.holdInbound(message("third"), on: winner)
        #expect(third)
        #expect(record.heldInbound.count == 1)
    }

    // MARK: The bound

    @Test("a session at its bound: a connected peer's connection is named; a suspended peer's session ends with sessionBufferFull")
    func boundReached() throws {
        let c = Connection("c")
        var record = resumedRecord(on: c, limit: 10)
        #expect(!record.sessionEndsAtBound)
        #expect(record.recordInSession(frame("0123456789"))?.outcome == .kept(sequence: 1))
        #expect(record.recordInSession(frame("x"))?.outcome == .full(unacknowledgedBytes: 10))
        #expect(!record.sessionEndsAtBound, "connected: the next frame fails the connection, it does not end the session")
        guard case let .connected(current)? = record.sessionBoundReached() else {
            Issue.record("not connected")
            return
        }
        #expect(current === c)
        #expect(record.session != nil)

        #expect(record.session?.wait("sender") == .waiting)
        #expect(lose(&record, c) == 1)
        let armed = record.windowTimerArmed(Timer(name: "window"), generation: 1)
        #expect(armed)
        #expect(record.sessionEndsAtBound, "suspended at the bound: the next frame ends the session")
        guard case let .ended(ended)? = record.sessionBoundReached() else {
            Issue.record("not ended")
            return
        }
        #expect(ended.error == .sessionBufferFull(peer: "B", unacknowledgedBytes: 10, limit: 10))
        #expect(ended.waiters == ["sender"])
        #expect(ended.windowTimer == Timer(name: "window"))
        #expect(record.session == nil)
        #expect(!record.isConnected)
        #expect(record.sessionBoundReached() == nil)
        #expect(!record.sessionEndsAtBound, "no session")
    }

    @Test("acknowledgements overdue: nothing when one came meanwhile or there is room; else what the bound decides")
    func acknowledgementsOverdue() {
        let c = Connection("c")
        var record = resumedRecord(on: c, limit: 10)
        // Not at the bound: nothing.
        #expect(record.acknowledgementsOverdue(since: 0) == nil)
        _ = record.recordInSession(frame("aaaaa"))
        _ = record.recordInSession(frame("bbbbb"))
        _ = record.sessionControl(.ack(received: 1), on: c)
        _ = record.recordInSession(frame("ccccc"))
        #expect(record.session?.isFull == true)
        // Full, but the peer acknowledged since the sender began to wait.
        #expect(record.acknowledgementsOverdue(since: 0) == nil)
        guard case let .connected(current)? = record.acknowledgementsOverdue(since: 1) else {
            Issue.record("not overdue")
            return
        }
        #expect(current === c)

        var plain = newRecord()
        #expect(plain.acknowledgementsOverdue(since: 0) == nil)
    }

    // MARK: Timers

    @Test("the acknowledgement timer acknowledges what arrived on the current connection, once")
    func acknowledgementTimer() {
        let c = Connection("c")
        var record = resumedRecord(on: c)
        _ = record.sessionControl(.resend(from: 1), on: c)
        _ = record.receiveNumbered(message(), on: c)
        _ = record.receiveNumbered(message(), on: c)
        let fired = record.acknowledgementTimerFired()
        #expect(fired?.count == 2)
        #expect(fired?.connection === c)
        // Nothing new since.
        #expect(record.acknowledgementTimerFired() == nil)

        // Something new, but the connection is gone: nothing to send it on.
        #expect(record.receiveNumbered(message(), on: c) == (.deliver(acknowledge: nil, armTimer: true), false))
        #expect(record.link.closed(c, byeDuplicate: false) == .disconnected)
        #expect(record.acknowledgementTimerFired() == nil)

        var plain = newRecord()
        #expect(plain.acknowledgementTimerFired() == nil)
    }

    @Test("the resume window ends while a connection came back unresumed: the session ends and that connection is closed")
    func windowExpiresWhileConnected() throws {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = suspendedFull(on: c1, resendFrom: false)
        _ = record.sessionControl(.resend(from: 1), on: c2)
        #expect(arrive(&record, c2).arrival.resumes)

        // An earlier window's timer is ignored.
        #expect(record.windowExpired(generation: 2, window: .seconds(30)) == nil)
        #expect(record.session != nil)

        let expired = record.windowExpired(generation: 1, window: .seconds(30))
        let expiry = try #require(expired)
        #expect(expiry.error == .sessionExpired(peer: "B", window: .seconds(30)))
        #expect(expiry.waiters == ["sender"])
        guard case let .close(connection) = expiry.then else {
            Issue.record("not closed: \(expiry.then)")
            return
        }
        #expect(connection === c2)
        #expect(record.session == nil)
        #expect(record.windowTimer == nil)
        #expect(record.inboundNext.isEmpty)
        #expect(record.isConnected)
    }

    @Test("the resume window ends with no connection: the session ends and the peer is disconnected")
    func windowExpiresWhileDisconnected() throws {
        let c = Connection("c")
        var record = resumedRecord(on: c)
        #expect(lose(&record, c) == 1)
        #expect(record.isConnected)
        let expired = record.windowExpired(generation: 1, window: .seconds(5))
        let expiry = try #require(expired)
        #expect(expiry.error.code == .sessionExpired)
        #expect(expiry.waiters.isEmpty)
        guard case .disconnect = expiry.then else {
            Issue.record("not disconnected: \(expiry.then)")
            return
        }
        #expect(record.session == nil)
        #expect(!record.isConnected)
        #expect(record.snapshot.isConnected == false)
        // Once ended, a late firing changes nothing.
        #expect(record.windowExpired(generation: 1, window: .seconds(5)) == nil)
    }

    @Test("a suspended peer whose process ended: its session ends with the error given, its waiters and window timer handed back")
    func exitedWhileSuspended() throws {
        let c = Connection("c")
        var record = suspendedFull(on: c, resendFrom: false)
        let error = PeerKitError.peerExited(peer: "B", refusals: "connecting to 10.0.0.2:7000 failed: refused")
        let exited = record.exited(error)
        let ended = try #require(exited)
        #expect(ended.error == error)
        #expect(ended.waiters == ["sender"])
        #expect(ended.windowTimer == Timer(name: "window"))
        #expect(record.session == nil)
        #expect(record.windowTimer == nil)
        #expect(!record.isConnected)
        // Once ended, another refusal changes nothing.
        #expect(record.exited(error) == nil)
    }

    @Test("the session's errors name the peer with its control characters escaped: they are logged")
    func errorsEscapeTheName() throws {
        let c = Connection("c")
        var record = Record(peer: Peer(id: Self.remote, name: "B\n2026-12-06 notice forged", isConnected: false))
        arrive(&record, c)
        _ = record.sessionControl(.resume(received: 0), on: c)
        #expect(lose(&record, c) == 1)
        let expired = record.windowExpired(generation: 1, window: .seconds(5))
        let expiry = try #require(expired)
        #expect(expiry.error.description.hasPrefix("B\\n2026-12-06 notice forged was unreachable"), "\(expiry.error)")
        #expect(!expiry.error.description.contains("\n"))
        #expect(record.safeName == "B\\n2026-12-06 notice forged")
    }

    @Test("a peer that is connected, or back and resuming, or without a session, is not ended by an old address's refusal")
    func exitedIgnoredUnlessSuspended() {
        let c1 = Connection("c1"), c2 = Connection("c2")
        let error = PeerKitError.peerExited(peer: "B", refusals: "refused")
        var connected = resumedRecord(on: c1)
        #expect(connected.exited(error) == nil)
        #expect(connected.session?.phase == .active)

        // It dialled us meanwhile: the session resumes on that connection.
        var resuming = resumedRecord(on: c1)
        #expect(lose(&resuming, c1) == 1)
        arrive(&resuming, c2, direction: .inbound)
        #expect(resuming.exited(error) == nil)
        #expect(resuming.session?.isEnded == false)

        var plain = newRecord()
        #expect(plain.exited(error) == nil)
    }

    @Test("a connection that dies before the peer resumed on it keeps the window that runs; a timer for a peer no longer suspended is refused")
    func suspendAgainAndWindowTimer() {
        let c1 = Connection("c1"), c2 = Connection("c2")
        var record = resumedRecord(on: c1)
        let early = record.windowTimerArmed(Timer(name: "early"), generation: 1)
        #expect(!early)
        #expect(lose(&record, c1) == 1)
        arrive(&record, c2)
        #expect(lose(&record, c2) == nil)
        #expect(record.session?.phase == .suspended(generation: 1))
        let armed = record.windowTimerArmed(Timer(name: "window"), generation: 1)
        #expect(armed)
        #expect(record.windowTimer?.timer == Timer(name: "window"))
        #expect(record.windowTimer?.generation == 1)

        var plain = newRecord()
        #expect(plain.suspend() == nil)
    }

    @Test("dropping a session hands back its waiters and window timer and forgets its numbering")
    func dropSession() {
        let c = Connection("c")
        var record = suspendedFull(on: c, resendFrom: true)
        let error = PeerKitError.connectionClosed(peer: "B")
        let ended = record.dropSession(error)
        #expect(ended?.error == error)
        #expect(ended?.waiters == ["sender"])
        #expect(ended?.windowTimer == Timer(name: "window"))
        #expect(record.session == nil)
        #expect(record.windowTimer == nil)
        #expect(record.inboundNext.isEmpty)
        #expect(record.dropSession(error) == nil)
    }
}
