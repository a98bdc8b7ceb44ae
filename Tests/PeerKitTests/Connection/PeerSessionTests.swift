import NIOCore
import Testing
@testable import PeerKit

/// Every phase and transition of ``PeerSession``, with plain values: no sockets, no clock. The
/// last tests drive two sessions over a simulated link that is cut at random moments and check
/// that every frame arrives once, in order.
@Suite("Peer session (resume, no I/O)")
struct PeerSessionTests {
    typealias Session = PeerSession<String>

    static let expired = PeerKitError.sessionExpired(peer: "the peer \"B\"", window: .seconds(30))

    func frame(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    /// A session that completed its first resume exchange (the peer received nothing yet).
    func activeSession(limit: Int = 100, ackAfter: Int? = nil, perFrameOverhead: Int = 0) -> Session {
        var session = Session(limits: .init(maximumUnacknowledgedBytes: limit, acknowledgeAfterBytes: ackAfter, perFrameOverhead: perFrameOverhead), remoteIncarnation: "b1", fingerprint: nil)
        #expect(session.connected() == 0)
        #expect(session.peerResumed(received: 0) == .resumed(generation: 0))
        let writes = session.takeUnwritten()
        #expect(writes.from == 1)
        #expect(writes.frames.isEmpty)
        #expect(session.phase == .active)
        return session
    }

    func texts(_ writes: Session.Writes) -> [String] { writes.frames.map { String(buffer: $0) } }

    // MARK: a new session

    @Test("a new session keeps frames until the peer's resume, then writes them in order, the first connection's number first")
    func newSessionHoldsUntilResume() {
        var session = Session(limits: .init(maximumUnacknowledgedBytes: 100), remoteIncarnation: "b1", fingerprint: nil)
        #expect(session.phase == .resuming(generation: 0))
        #expect(session.record(frame("one")) == .kept(sequence: 1))
        #expect(session.takeUnwritten().isEmpty)
        #expect(session.connected() == 0)
        #expect(session.record(frame("two")) == .kept(sequence: 2))
        #expect(session.takeUnwritten().isEmpty)
        #expect(session.peerResumed(received: 0) == .resumed(generation: 0))
        #expect(session.record(frame("three")) == .kept(sequence: 3))
        let writes = session.takeUnwritten()
        #expect(writes.from == 1)
        #expect(texts(writes) == ["one", "two", "three"])
        #expect(session.takeUnwritten().isEmpty)
        #expect(session.record(frame("four")) == .kept(sequence: 4))
        let more = session.takeUnwritten()
        #expect(more.from == nil)
        #expect(texts(more) == ["four"])
        #expect(session.unacknowledgedCount == 4)
        #expect(session.unacknowledgedBytes == 15)
    }

    @Test("the frame a send just numbered is handed on alone, with no array; frames held back go together, in order")
    func framesToWrite() {
        var session = activeSession()
        #expect(session.record(frame("a")) == .kept(sequence: 1))
        let alone = session.takeUnwritten().frames
        guard case let .one(only) = alone else {
            Issue.record("one frame to write came as \(alone), not alone")
            return
        }
        #expect(String(buffer: only) == "a")
        #expect(Array(alone.map { String(buffer: $0) }) == ["a"])

        // Two numbered before a take (another sender's, or a switch between them): both, in order.
        #expect(session.record(frame("b")) == .kept(sequence: 2))
        #expect(session.record(frame("c")) == .kept(sequence: 3))
        let both = session.takeUnwritten()
        guard case .several = both.frames else {
            Issue.record("two frames to write came as \(both.frames)")
            return
        }
        #expect(texts(both) == ["b", "c"])
        #expect(both.frames.count == 2)
        #expect(session.takeUnwritten().frames.isEmpty)
    }

    @Test("a graceful stop writes what the peer's resume was still holding back, from its first unacknowledged frame")
    func stopWritesHeldFrames() {
        // A new session: sent right after connecting, before the peer's resume arrived.
        var fresh = Session(limits: .init(maximumUnacknowledgedBytes: 100), remoteIncarnation: "b1", fingerprint: nil)
        #expect(fresh.connected() == 0)
        #expect(fresh.record(frame("one")) == .kept(sequence: 1))
        #expect(fresh.takeUnwritten().isEmpty)
        let stop = fresh.takeUnwrittenForStop()
        #expect(stop.from == 1)
        #expect(texts(stop) == ["one"])
        #expect(fresh.takeUnwrittenForStop().isEmpty)

        // Active: only what was not written yet, with no number (the connection has one).
        var active = activeSession()
        #expect(active.record(frame("a")) == .kept(sequence: 1))
        #expect(texts(active.takeUnwritten()) == ["a"])
        #expect(active.record(frame("b")) == .kept(sequence: 2))
        let rest = active.takeUnwrittenForStop()
        #expect(rest.from == nil)
        #expect(texts(rest) == ["b"])

        // Suspended: no connection to write on.
        _ = active.suspend()
        #expect(active.takeUnwrittenForStop().isEmpty)
    }

    // MARK: acknowledgements and the bound

    @Test("a cumulative acknowledgement frees every frame through its count and resumes the waiters")
    func acknowledgementFrees() {
        var session = activeSession(limit: 8)
        #expect(session.record(frame("aaaa")) == .kept(sequence: 1))
        #expect(session.record(frame("bbbb")) == .kept(sequence: 2))
        #expect(session.isFull)
        #expect(session.record(frame("cccc")) == .full(unacknowledgedBytes: 8))
        #expect(session.wait("w") == .waiting)
        guard case let .freed(bytes, waiters) = session.acknowledged(through: 1) else { Issue.record("not freed"); return }
        #expect(bytes == 4)
        #expect(waiters == ["w"])
        #expect(session.unacknowledgedBytes == 4)
        #expect(session.record(frame("cccc")) == .kept(sequence: 3))
        guard case .stale = session.acknowledged(through: 1) else { Issue.record("an old acknowledgement freed something"); return }
        guard case let .freed(bytes, _) = session.acknowledged(through: 3) else { Issue.record("not freed"); return }
        #expect(bytes == 8)
        #expect(session.unacknowledgedCount == 0)
    }

    @Test("an acknowledgement of frames never sent is a protocol violation")
    func acknowledgementBeyondSent() {
        var session = activeSession()
        _ = session.record(frame("x"))
        guard case let .invalid(reason) = session.acknowledged(through: 2) else { Issue.record("accepted"); return }
        #expect(reason == "it acknowledged 2 session frames, but only 1 were sent to it")
    }

    @Test("the tail never holds more than the bound plus one frame")
    func boundAtEveryMoment() {
        var session = activeSession(limit: 10)
        #expect(session.record(frame(String(repeating: "x", count: 25))) == .kept(sequence: 1))
        #expect(session.record(frame("y")) == .full(unacknowledgedBytes: 25))
        #expect(session.wait("w") == .waiting)
        _ = session.acknowledged(through: 1)
        #expect(session.wait("w2") == .now)
        for i in 0..<10 { #expect(session.record(frame("z")) == .kept(sequence: UInt64(2 + i))) }
        #expect(session.record(frame("z")) == .full(unacknowledgedBytes: 10))
        #expect(session.record(frame(String(repeating: "x", count: 25))) == .full(unacknowledgedBytes: 10))
        #expect(session.unacknowledgedBytes == 10)
    }

    @Test("each kept frame counts its overhead too, so many small frames reach the bound as their memory does, and an acknowledgement gives it back")
    func perFrameOverhead() {
        var session = activeSession(limit: 1000, perFrameOverhead: 256)
        // Three frames of 10 bytes cost 798; the fourth takes the tail to 1064, over the bound.
        for sequence in 1...4 { #expect(session.record(frame("0123456789")) == .kept(sequence: UInt64(sequence))) }
        #expect(session.unacknowledgedBytes == 4 * 266)
        #expect(session.record(frame("x")) == .full(unacknowledgedBytes: 1064))
        guard case let .freed(bytes, _) = session.acknowledged(through: 2) else { Issue.record("not freed"); return }
        #expect(bytes == 2 * 266)
        #expect(session.unacknowledgedBytes == 2 * 266)
    }

    @Test("the tail charges the frames made for this peer alone to the transceiver's budget until they are acknowledged, not a broadcast's, and gives back the rest when the session ends")
    func budgetShare() {
        let budget = OutboundBudget(limit: 1 << 20)
        var session = Session(limits: .init(maximumUnacknowledgedBytes: 10_000, perFrameOverhead: 256), remoteIncarnation: "b1", fingerprint: nil,
                              share: OutboundBudget.Share(budget: budget))
        #expect(session.record(frame("0123456789"), charged: true) == .kept(sequence: 1))
        #expect(session.record(frame("broadcast!"), charged: false) == .kept(sequence: 2))
        #expect(session.record(frame("0123456789")) == .kept(sequence: 3))
        #expect(session.unacknowledgedBytes == 3 * 266, "the bound counts every frame")
        #expect(session.chargedBytes == 2 * 266 && budget.total == 2 * 266, "the budget only the two made for this peer")
        _ = session.connected()
        _ = session.peerResumed(received: 0)
        #expect(session.takeUnwritten().frames.count == 3)
        #expect(budget.total == 2 * 266, "written and not acknowledged: still held, still charged")
        _ = session.acknowledged(through: 2)
        #expect(session.chargedBytes == 266 && budget.total == 266)
        _ = session.end(.notRunning)
        #expect(session.chargedBytes == 0 && budget.total == 0)
    }

    @Test("a restart that drops the frames written to a peer that ended its side gives back their charge; a session discarded without ending gives back the rest")
    func budgetShareOnRestartAndRelease() {
        let budget = OutboundBudget(limit: 1 << 20)
        do {
            var session = Session(limits: .init(maximumUnacknowledgedBytes: 10_000), remoteIncarnation: "b1", fingerprint: nil,
                                  share: OutboundBudget.Share(budget: budget))
            _ = session.connected()
            _ = session.peerResumed(SessionFrame.Resume(received: 0, epoch: "p1", peerEpoch: session.epoch))
            #expect(session.record(frame("aaaa")) == .kept(sequence: 1))
            #expect(session.record(frame("bb"), charged: false) == .kept(sequence: 2))
            #expect(session.takeUnwritten().frames.count == 2)
            _ = session.suspend()
            #expect(session.record(frame("cccccc")) == .kept(sequence: 3), "kept while suspended, never written")
            #expect(budget.total == 10)
            _ = session.connected()
            // The peer ended its side: what was written to it is dropped, what never was goes on.
            guard case .restarted(_, 2, 6, _) = session.peerResumed(SessionFrame.Resume(received: 0, epoch: "p2")) else {
                Issue.record("not restarted as expected")
                return
            }
            #expect(session.chargedBytes == 6 && budget.total == 6, "the unwritten frame stays charged")
        }
        #expect(budget.total == 0, "the session was discarded with a frame in its tail: its share gave it back")
    }

    @Test("acknowledgements go after a number of bytes or once per timer, never one per message")
    func acknowledgementPolicy() {
        var session = activeSession(limit: 1000, ackAfter: 100)
        #expect(session.receive(sequence: 1, bytes: 30) == .deliver(acknowledge: nil, armTimer: true))
        #expect(session.receive(sequence: 2, bytes: 30) == .deliver(acknowledge: nil, armTimer: false))
        #expect(session.receive(sequence: 3, bytes: 30) == .deliver(acknowledge: nil, armTimer: false))
        #expect(session.receive(sequence: 4, bytes: 30) == .deliver(acknowledge: 4, armTimer: false))
        #expect(session.receive(sequence: 5, bytes: 30) == .deliver(acknowledge: nil, armTimer: false))
        #expect(session.acknowledgementTimerFired() == 5)
        // Nothing new: no acknowledgement.
        #expect(session.acknowledgementTimerFired() == nil)
        #expect(session.receive(sequence: 6, bytes: 1) == .deliver(acknowledge: nil, armTimer: true))
        #expect(session.acknowledgedToPeer == 5)
    }

    @Test("a frame numbered at or below what was received is a duplicate; one beyond the next is a gap")
    func duplicatesAndGaps() {
        var session = activeSession()
        #expect(session.receive(sequence: 1, bytes: 1) == .deliver(acknowledge: nil, armTimer: true))
        #expect(session.receive(sequence: 1, bytes: 1) == .duplicate)
        #expect(session.receive(sequence: 3, bytes: 1) == .gap("its session frame 3 came after 1: frames are missing between them"))
        #expect(session.receive(sequence: 2, bytes: 1) == .deliver(acknowledge: nil, armTimer: false))
        #expect(session.received == 2)
    }

    @Test("the default acknowledgement threshold is a quarter of the bound, at most 256 KiB")
    func defaultThreshold() {
        #expect(PeerSession<String>.Limits(maximumUnacknowledgedBytes: 100).acknowledgeAfterBytes == 25)
        #expect(PeerSession<String>.Limits(maximumUnacknowledgedBytes: 8 << 20).acknowledgeAfterBytes == 256 * 1024)
    }

    // MARK: suspend and resume

    @Test("a suspended session keeps frames up to the bound and resends exactly what the peer did not receive")
    func suspendAndResume() {
        var session = activeSession(limit: 100)
        for name in ["1", "2", "3"] { _ = session.record(frame(name)) }
        #expect(texts(session.takeUnwritten()) == ["1", "2", "3"])
        _ = session.acknowledged(through: 1)
        #expect(session.suspend() == .armWindowTimer(generation: 1))
        #expect(session.isSuspended)
        #expect(session.suspend() == .none)
        #expect(session.record(frame("4")) == .kept(sequence: 4))
        #expect(session.takeUnwritten().isEmpty)
        // The acknowledgement timer does not acknowledge on a dead connection.
        _ = session.receive(sequence: 1, bytes: 1)
        #expect(session.acknowledgementTimerFired() == nil)
        #expect(session.connected() == 1)
        #expect(session.record(frame("5")) == .kept(sequence: 5))
        // The peer got 1 and 2 (2 was in flight when the link died).
        #expect(session.peerResumed(received: 2) == .resumed(generation: 1))
        let writes = session.takeUnwritten()
        #expect(writes.from == 3)
        #expect(texts(writes) == ["3", "4", "5"])
        // The old window's timer firing late does nothing.
        #expect(session.windowExpired(generation: 1, error: Self.expired) == nil)
        #expect(session.phase == .active)
    }

    @Test("a resume whose count is below an acknowledgement that overtook it resends after the higher; above what was sent is a violation")
    func resumeCounts() {
        var session = activeSession()
        for name in ["1", "2", "3"] { _ = session.record(frame(name)) }
        _ = session.takeUnwritten()
        _ = session.acknowledged(through: 2)
        _ = session.suspend()
        _ = session.connected()
        #expect(session.peerResumed(received: 4) == .invalid("it resumed having received 4 session frames, but only 3 were sent to it"))
        #expect(session.peerResumed(received: 1) == .resumed(generation: 1))
        let writes = session.takeUnwritten()
        #expect(writes.from == 3)
        #expect(texts(writes) == ["3"])
        #expect(session.peerResumed(received: 3) == .invalid("it sent peerkit.resume again on a connection that had resumed"))
    }

    @Test("frames acknowledged on a closing connection before they were written on the new one are not written there")
    func acknowledgedBeforeWritten() {
        var session = activeSession()
        for name in ["1", "2", "3"] { _ = session.record(frame(name)) }
        _ = session.takeUnwritten()
        #expect(session.connected() == 0)
        #expect(session.peerResumed(received: 0) == .resumed(generation: 0))
        _ = session.acknowledged(through: 2)
        let writes = session.takeUnwritten()
        #expect(writes.from == 3)
        #expect(texts(writes) == ["3"])
    }

    @Test("when the window expires the session ends: the tail is dropped, waiters resume, and further frames are refused with the reason")
    func windowExpires() {
        var session = activeSession(limit: 2)
        _ = session.record(frame("ab"))
        _ = session.suspend()
        #expect(session.wait("w") == .waiting)
        #expect(session.windowExpired(generation: 0, error: Self.expired) == nil)
        #expect(session.windowExpired(generation: 1, error: Self.expired) == ["w"])
        #expect(session.isEnded)
        #expect(session.unacknowledgedBytes == 0)
        #expect(session.record(frame("c")) == .ended(Self.expired))
        #expect(session.connected() == nil)
        #expect(session.wait("w2") == .now)
        #expect(!session.continues(incarnation: "b1", fingerprint: nil))
    }

    @Test("the window also runs while a new connection waits for the peer's resume, and a connection dying then arms no second window")
    func windowRunsWhileResuming() {
        var session = activeSession()
        _ = session.suspend()
        _ = session.connected()
        #expect(session.suspend() == .none)
        _ = session.connected()
        #expect(session.windowExpired(generation: 1, error: Self.expired) == [])
        #expect(session.isEnded)
    }

    // MARK: epochs: a session ended on one side only

    /// A session of epoch `epoch` with a peer of incarnation `remote`.
    func session(epoch: String, remote: String = "b1", limit: Int = 100) -> Session {
        Session(limits: .init(maximumUnacknowledgedBytes: limit), remoteIncarnation: remote, fingerprint: nil, epoch: epoch)
    }

    /// A new connection between `a` and `b`: each sends its resume, and each reads the other's.
    func reconnect(_ a: inout Session, _ b: inout Session) -> (atA: Session.Resumed, atB: Session.Resumed) {
        let fromA = a.resume(received: a.connected()!)
        let fromB = b.resume(received: b.connected()!)
        return (a.peerResumed(fromB), b.peerResumed(fromA))
    }

    @Test("resumes name both epochs; while both sides keep the session, a reconnection resumes it as before")
    func epochsContinue() {
        var a = session(epoch: "a1", remote: "b")
        var b = session(epoch: "b1", remote: "a")
        #expect(a.resume(received: 0) == SessionFrame.Resume(received: 0, epoch: "a1", peerEpoch: nil))
        #expect(reconnect(&a, &b) == (.resumed(generation: 0), .resumed(generation: 0)))
        #expect(a.peerEpoch == "b1")
        #expect(b.peerEpoch == "a1")
        for name in ["1", "2", "3"] { _ = a.record(frame(name)) }
        #expect(texts(a.takeUnwritten()) == ["1", "2", "3"])
        _ = b.receive(sequence: 1, bytes: 1)
        _ = b.receive(sequence: 2, bytes: 1)
        _ = a.suspend()
        _ = b.suspend()
        #expect(a.resume(received: a.received) == SessionFrame.Resume(received: 0, epoch: "a1", peerEpoch: "b1"))
        #expect(reconnect(&a, &b) == (.resumed(generation: 1), .resumed(generation: 1)))
        let writes = a.takeUnwritten()
        #expect(writes.from == 3)
        #expect(texts(writes) == ["3"])
    }

    @Test("a peer that ended its side (a new epoch) while this side kept the session: what was written and not acknowledged is dropped, what was never written goes on from 1, both counts start again")
    func peerEndedItsSide() {
        var a = session(epoch: "a1", remote: "b")
        var b = session(epoch: "b1", remote: "a")
        _ = reconnect(&a, &b)
        for name in ["1", "2", "3"] { _ = a.record(frame(name)) }
        _ = a.takeUnwritten()
        _ = a.acknowledged(through: 1)
        _ = a.receive(sequence: 1, bytes: 1)
        _ = a.suspend()
        #expect(a.wait("w") == .now, "room: no waiter is left")
        // Written to no connection: the link is down.
        _ = a.record(frame("four"))
        // B's window ran out first; its next session with A has another epoch.
        _ = b.suspend()
        _ = b.windowExpired(generation: 1, error: Self.expired)
        var b2 = session(epoch: "b2", remote: "a")
        let (atA, atB) = reconnect(&a, &b2)
        #expect(atA == .restarted(generation: 1, lostFrames: 2, lostBytes: 2, waiters: []))
        // A's count (1, of B's first session) is about an epoch of B's that ended: B2 sent nothing.
        #expect(atB == .resumed(generation: 0))
        #expect(a.peerEpoch == "b2")
        #expect(a.received == 0)
        #expect(a.sent == 1)
        let writes = a.takeUnwritten()
        #expect(writes.from == 1)
        #expect(texts(writes) == ["four"])
        #expect(b2.receive(sequence: 1, bytes: 4) == .deliver(acknowledge: nil, armTimer: true))
        _ = b2.record(frame("x"))
        #expect(b2.takeUnwritten().from == 1)
        #expect(a.receive(sequence: 1, bytes: 1) == .deliver(acknowledge: nil, armTimer: true), "B2's frames count from 1 at A")
        // The next reconnection continues the new session.
        _ = a.suspend()
        _ = b2.suspend()
        #expect(reconnect(&a, &b2) == (.resumed(generation: 2), .resumed(generation: 1)))
    }

    @Test("a restart that frees room resumes the waiters, and a restart that frees none leaves them waiting")
    func restartWaiters() {
        var a = session(epoch: "a1", remote: "b", limit: 2)
        var b = session(epoch: "b1", remote: "a")
        _ = reconnect(&a, &b)
        _ = a.record(frame("ab"))
        _ = a.takeUnwritten()
        #expect(a.wait("w") == .waiting)
        _ = a.suspend()
        var b2 = session(epoch: "b2", remote: "a")
        #expect(reconnect(&a, &b2).atA == .restarted(generation: 1, lostFrames: 1, lostBytes: 2, waiters: ["w"]))
        #expect(a.unacknowledgedBytes == 0)

        var c = session(epoch: "c1", remote: "d", limit: 2)
        var d = session(epoch: "d1", remote: "c")
        _ = reconnect(&c, &d)
        _ = c.suspend()
        _ = c.record(frame("ab"))
        #expect(c.wait("w") == .waiting)
        var d2 = session(epoch: "d2", remote: "c")
        #expect(reconnect(&c, &d2).atA == .restarted(generation: 1, lostFrames: 0, lostBytes: 0, waiters: []))
        #expect(c.waiterCount == 1, "never written, the frame stays: no room was made")
    }

    @Test("a count about another epoch of ours is not checked against what this session sent: the peer received nothing of it")
    func countOfAnotherEpoch() {
        var a = session(epoch: "a2", remote: "b")
        _ = a.connected()
        _ = a.record(frame("one"))
        #expect(a.peerResumed(SessionFrame.Resume(received: 7, epoch: "b1", peerEpoch: "a1")) == .resumed(generation: 0))
        #expect(texts(a.takeUnwritten()) == ["one"])
        // Without epochs, the count is taken as it is (a peer that names none).
        var old = session(epoch: "a3", remote: "b")
        _ = old.connected()
        #expect(old.peerResumed(received: 7) == .invalid("it resumed having received 7 session frames, but only 0 were sent to it"))
    }

    @Test("a resume on another connection acknowledges only when it names this session's epochs")
    func resumeOnAnotherConnection() {
        var a = session(epoch: "a1", remote: "b")
        _ = a.connected()
        _ = a.peerResumed(SessionFrame.Resume(received: 0, epoch: "b1", peerEpoch: nil))
        for name in ["1", "2"] { _ = a.record(frame(name)) }
        _ = a.takeUnwritten()
        guard case .stale = a.acknowledged(by: SessionFrame.Resume(received: 2, epoch: "b0", peerEpoch: "a1")) else {
            Issue.record("a resume of another epoch acknowledged"); return
        }
        guard case .stale = a.acknowledged(by: SessionFrame.Resume(received: 2, epoch: "b1", peerEpoch: "a0")) else {
            Issue.record("a resume about another epoch of ours acknowledged"); return
        }
        guard case .freed(bytes: 2, _) = a.acknowledged(by: SessionFrame.Resume(received: 2, epoch: "b1", peerEpoch: "a1")) else {
            Issue.record("a resume of this session did not acknowledge"); return
        }
    }

    @Test("a session continues only with the same incarnation and the same fingerprint")
    func sameAuthenticatedPeer() {
        let session = Session(limits: .init(maximumUnacknowledgedBytes: 10), remoteIncarnation: "b1", fingerprint: "f1")
        #expect(session.continues(incarnation: "b1", fingerprint: "f1"))
        #expect(!session.continues(incarnation: "b2", fingerprint: "f1"))
        #expect(!session.continues(incarnation: "b1", fingerprint: "f2"))
        #expect(!session.continues(incarnation: "b1", fingerprint: nil))
    }

    @Test("ending a session (a restarted peer) drops the tail and returns the waiters once")
    func endOnce() {
        var session = activeSession(limit: 1)
        _ = session.record(frame("a"))
        #expect(session.wait("w") == .waiting)
        let restarted = PeerKitError.peerRestarted(peer: "the peer \"B\"")
        #expect(session.end(restarted) == ["w"])
        #expect(session.end(restarted) == [])
        #expect(session.phase == .ended(restarted))
        guard case .stale = session.acknowledged(through: 1) else { Issue.record("an ended session took an acknowledgement"); return }
    }

    // MARK: two sessions over links cut at random

    /// Two sessions, A sending to B over connections that are cut at random (what is in flight
    /// is lost, as in a socket's buffers) or replaced while the old one still delivers (a
    /// duplicate connection): every frame A recorded arrives at B once, in order; with resumes
    /// that carry epochs (PeerKit's) and without (another implementation's).
    @Test("links cut or replaced at random moments lose, duplicate and reorder nothing", arguments: [false, true], 1...8 as ClosedRange<UInt64>)
    func randomCuts(epochs: Bool, seed: UInt64) {
        var simulation = SessionSimulation(seed: seed, epochs: epochs, endsB: false)
        simulation.run(steps: 4000)
        simulation.settle()
        let firstDifference = simulation.delivered.indices.first { simulation.delivered[$0] != $0 }
        #expect(simulation.delivered.count == simulation.sent, "delivered \(simulation.delivered.count) of \(simulation.sent); A: \(simulation.a.phase), B: \(simulation.b.phase)")
        #expect(firstDifference == nil, "the first difference is at \(String(describing: firstDifference))")
        #expect(simulation.restarts == 0)
        #expect(simulation.sent > 200)
    }

    /// As ``randomCuts(epochs:seed:)``, and B also ends its side of the session at random while
    /// the link is down (its window ran out first) and starts a new one with a new epoch: no
    /// resume is ever a violation, B never takes a frame twice or out of order, and every frame
    /// that did not arrive is among those A's restarts reported lost.
    @Test("sessions ended on one side at random, between links cut at random: no violation, no frame twice or out of order, every loss reported", arguments: 1...8 as ClosedRange<UInt64>)
    func randomOneSidedEnds(seed: UInt64) {
        var simulation = SessionSimulation(seed: seed, epochs: true, endsB: true)
        simulation.run(steps: 6000)
        simulation.settle()
        let delivered = simulation.delivered
        let missing = simulation.sent - delivered.count
        #expect(zip(delivered, delivered.dropFirst()).allSatisfy { $0 < $1 }, "a frame twice or out of order")
        #expect(simulation.a.unacknowledgedCount == 0, "everything acknowledged once settled")
        #expect(missing >= 0 && missing <= simulation.lost, "\(missing) frames did not arrive, \(simulation.lost) reported lost")
        #expect(simulation.restarts > 1, "the run ended B's side more than once: \(simulation.restarts) restarts")
        #expect(simulation.sent > 200)
    }
}
