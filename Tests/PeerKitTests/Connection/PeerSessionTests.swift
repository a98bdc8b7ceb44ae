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
    func texts(_ frames: CircularBuffer<ByteBuffer>) -> [String] { frames.map { String(buffer: $0) } }

    /// A session that completed its first resume exchange (the peer received nothing yet).
    func activeSession(limit: Int = 100, ackAfter: Int? = nil) -> Session {
        var session = Session(limits: .init(maximumUnacknowledgedBytes: limit, acknowledgeAfterBytes: ackAfter), remoteIncarnation: "b1", fingerprint: nil)
        #expect(session.connected() == 0)
        guard case let .resend(frames, _) = session.peerResumed(received: 0) else { Issue.record("not resumed"); return session }
        #expect(frames.isEmpty)
        #expect(session.takeUnwritten().isEmpty)
        #expect(session.phase == .active)
        return session
    }

    // MARK: a new session

    @Test("a new session keeps frames until the peer's resume, then they go out in order before later ones")
    func newSessionHoldsUntilResume() {
        var session = Session(limits: .init(maximumUnacknowledgedBytes: 100), remoteIncarnation: "b1", fingerprint: nil)
        #expect(session.phase == .resuming(generation: 0))
        #expect(session.record(frame("one")) == .kept(sequence: 1))
        #expect(session.connected() == 0)
        #expect(session.record(frame("two")) == .kept(sequence: 2))
        guard case let .resend(frames, generation) = session.peerResumed(received: 0) else { Issue.record("not resumed"); return }
        #expect(texts(frames) == ["one", "two"])
        #expect(generation == 0)
        // Recorded while the tail is written: written after it.
        #expect(session.record(frame("three")) == .kept(sequence: 3))
        #expect(texts(session.takeUnwritten()) == ["three"])
        #expect(session.takeUnwritten().isEmpty)
        #expect(session.phase == .active)
        #expect(session.record(frame("four")) == .write(sequence: 4))
        #expect(session.unacknowledgedCount == 4)
        #expect(session.unacknowledgedBytes == 15)
    }

    // MARK: acknowledgements and the bound

    @Test("a cumulative acknowledgement frees every frame through its count and resumes the waiters")
    func acknowledgementFrees() {
        var session = activeSession(limit: 10)
        #expect(session.record(frame("aaaa")) == .write(sequence: 1))
        #expect(session.record(frame("bbbb")) == .write(sequence: 2))
        #expect(session.record(frame("cccc")) == .full(unacknowledgedBytes: 8))
        #expect(session.wait("w", bytes: 4) == .waiting)
        guard case let .freed(bytes, waiters) = session.acknowledged(through: 1) else { Issue.record("not freed"); return }
        #expect(bytes == 4)
        #expect(waiters == ["w"])
        #expect(session.unacknowledgedBytes == 4)
        #expect(session.record(frame("cccc")) == .write(sequence: 3))
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

    @Test("the tail never holds more than the bound, except one frame larger than the bound on its own")
    func boundAtEveryMoment() {
        var session = activeSession(limit: 10)
        #expect(session.record(frame(String(repeating: "x", count: 25))) == .write(sequence: 1))
        #expect(session.record(frame("y")) == .full(unacknowledgedBytes: 25))
        #expect(session.wait("w", bytes: 1) == .waiting)
        _ = session.acknowledged(through: 1)
        #expect(session.wait("w2", bytes: 1) == .now)
        for i in 0..<10 { #expect(session.record(frame("z")) == .write(sequence: UInt64(2 + i))) }
        #expect(session.record(frame("z")) == .full(unacknowledgedBytes: 10))
        #expect(session.unacknowledgedBytes == 10)
    }

    @Test("acknowledgements go after a number of bytes or once per timer, never one per message")
    func acknowledgementPolicy() {
        var session = activeSession(limit: 1000, ackAfter: 100)
        #expect(session.received(bytes: 30) == (1, .armAcknowledgementTimer))
        #expect(session.received(bytes: 30) == (2, PeerSession<String>.Receive.none))
        #expect(session.received(bytes: 30) == (3, PeerSession<String>.Receive.none))
        #expect(session.received(bytes: 30) == (4, .acknowledge(4)))
        #expect(session.received(bytes: 30) == (5, PeerSession<String>.Receive.none))
        #expect(session.acknowledgementTimerFired() == 5)
        // Nothing new: no acknowledgement.
        #expect(session.acknowledgementTimerFired() == nil)
        #expect(session.received(bytes: 1) == (6, .armAcknowledgementTimer))
        #expect(session.acknowledgedToPeer == 5)
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
        for name in ["1", "2", "3"] { #expect(session.record(frame(name)).isWrite) }
        _ = session.acknowledged(through: 1)
        #expect(session.suspend() == .armWindowTimer(generation: 1))
        #expect(session.isSuspended)
        #expect(session.suspend() == .none)
        #expect(session.record(frame("4")) == .kept(sequence: 4))
        // The acknowledgement timer does not acknowledge on a dead connection.
        _ = session.received(bytes: 1)
        #expect(session.acknowledgementTimerFired() == nil)
        #expect(session.connected() == 1)
        #expect(session.record(frame("5")) == .kept(sequence: 5))
        // The peer got 1 and 2 (2 was in flight when the link died).
        guard case let .resend(frames, generation) = session.peerResumed(received: 2) else { Issue.record("not resumed"); return }
        #expect(generation == 1)
        #expect(texts(frames) == ["3", "4", "5"])
        #expect(session.takeUnwritten().isEmpty)
        #expect(session.record(frame("6")) == .write(sequence: 6))
        // The old window's timer firing late does nothing.
        #expect(session.windowExpired(generation: 1, error: Self.expired) == nil)
        #expect(session.phase == .active)
    }

    @Test("a resume with a count below what the peer acknowledged, or above what was sent, is a protocol violation")
    func impossibleResume() {
        var session = activeSession()
        for name in ["1", "2"] { _ = session.record(frame(name)) }
        _ = session.acknowledged(through: 1)
        _ = session.suspend()
        _ = session.connected()
        guard case let .invalid(low) = session.peerResumed(received: 0) else { Issue.record("accepted"); return }
        #expect(low == "it resumed having received 0 session frames, fewer than the 1 it had acknowledged")
        guard case let .invalid(high) = session.peerResumed(received: 3) else { Issue.record("accepted"); return }
        #expect(high == "it resumed having received 3 session frames, but only 2 were sent to it")
        guard case .resend = session.peerResumed(received: 2) else { Issue.record("refused"); return }
        guard case .invalid = session.peerResumed(received: 2) else { Issue.record("a second resume was accepted"); return }
    }

    @Test("a connection that replaces one not yet noticed dead resends what was not acknowledged")
    func replacedWhileActive() {
        var session = activeSession()
        for name in ["1", "2"] { _ = session.record(frame(name)) }
        #expect(session.connected() == 0)
        #expect(session.record(frame("3")) == .kept(sequence: 3))
        guard case let .resend(frames, _) = session.peerResumed(received: 1) else { Issue.record("not resumed"); return }
        #expect(texts(frames) == ["2", "3"])
    }

    @Test("when the window expires the session ends: the tail is dropped, waiters resume, and further frames are refused with the reason")
    func windowExpires() {
        var session = activeSession(limit: 2)
        _ = session.record(frame("ab"))
        _ = session.suspend()
        #expect(session.wait("w", bytes: 1) == .waiting)
        #expect(session.windowExpired(generation: 0, error: Self.expired) == nil)
        #expect(session.windowExpired(generation: 1, error: Self.expired) == ["w"])
        #expect(session.isEnded)
        #expect(session.unacknowledgedBytes == 0)
        #expect(session.record(frame("c")) == .ended(Self.expired))
        #expect(session.connected() == nil)
        #expect(session.wait("w2", bytes: 1) == .now)
        #expect(!session.continues(incarnation: "b1", fingerprint: nil))
    }

    @Test("the window also runs while a new connection waits for the peer's resume")
    func windowRunsWhileResuming() {
        var session = activeSession()
        _ = session.suspend()
        _ = session.connected()
        #expect(session.windowExpired(generation: 1, error: Self.expired) == [])
        #expect(session.isEnded)
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
        #expect(session.wait("w", bytes: 1) == .waiting)
        let restarted = PeerKitError.peerRestarted(peer: "the peer \"B\"")
        #expect(session.end(restarted) == ["w"])
        #expect(session.end(restarted) == [])
        #expect(session.phase == .ended(restarted))
        guard case .stale = session.acknowledged(through: 1) else { Issue.record("an ended session took an acknowledgement"); return }
    }

    // MARK: two sessions over a link cut at random

    /// Two sessions, A sending to B over a simulated link that is cut at random moments (what is
    /// in flight is lost, as in a socket's buffers when a connection dies), B acknowledging by its
    /// policy: every frame A recorded arrives at B once, in order.
    @Test("a link cut at random moments loses, duplicates and reorders nothing", arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func randomCuts(seed: UInt64) {
        var random = SplitMix(seed: seed)
        var a = Session(limits: .init(maximumUnacknowledgedBytes: 400, acknowledgeAfterBytes: 40), remoteIncarnation: "b", fingerprint: nil)
        var b = Session(limits: .init(maximumUnacknowledgedBytes: 400, acknowledgeAfterBytes: 40), remoteIncarnation: "a", fingerprint: nil)
        var toB: [ByteBuffer] = []   // A's session frames in flight
        var toA: [UInt64] = []       // B's acknowledgements in flight
        var delivered: [String] = []
        var nextMessage = 0
        var connected = false
        var bAckTimer = false

        func connect() {
            // Each side sends its resume first; each side's resume is applied by the other.
            let aReceived = a.connected()!
            let bReceived = b.connected()!
            _ = aReceived
            guard case let .resend(frames, _) = a.peerResumed(received: bReceived) else { Issue.record("A refused"); return }
            toB.append(contentsOf: frames)
            guard case .resend = b.peerResumed(received: aReceived) else { Issue.record("B refused"); return }
            toB.append(contentsOf: a.takeUnwritten())
            #expect(a.takeUnwritten().isEmpty)
            _ = b.takeUnwritten()
            connected = true
        }
        connect()
        for _ in 0..<3000 {
            switch random.next() % 100 {
            case 0..<50:
                let text = "m\(nextMessage)"
                switch a.record(frame(text)) {
                case .write: nextMessage += 1; toB.append(frame(text))
                case .kept: nextMessage += 1
                case .full: break
                case .ended: Issue.record("ended")
                }
            case 50..<80 where connected && !toB.isEmpty:
                let count = Int(random.next() % UInt64(toB.count)) + 1
                for f in toB.prefix(count) {
                    delivered.append(String(buffer: f))
                    switch b.received(bytes: f.readableBytes).action {
                    case let .acknowledge(n): toA.append(n)
                    case .armAcknowledgementTimer: bAckTimer = true
                    case .none: break
                    }
                }
                toB.removeFirst(count)
            case 80..<88 where connected && bAckTimer:
                bAckTimer = false
                if let n = b.acknowledgementTimerFired() { toA.append(n) }
            case 88..<95 where connected && !toA.isEmpty:
                for n in toA {
                    if case let .invalid(reason) = a.acknowledged(through: n) { Issue.record("\(reason)") }
                }
                toA = []
            case 95..<98 where connected:
                // The link dies: what is in flight is lost.
                toB = []
                toA = []
                bAckTimer = false
                connected = false
                _ = a.suspend()
                _ = b.suspend()
            case 98..<100 where !connected:
                connect()
            default:
                break
            }
            #expect(a.unacknowledgedBytes <= 400)
        }
        if !connected { connect() }
        for f in toB { delivered.append(String(buffer: f)); _ = b.received(bytes: f.readableBytes) }
        #expect(delivered == (0..<nextMessage).map { "m\($0)" })
        #expect(nextMessage > 500)
    }
}

extension PeerSession.Record {
    var isWrite: Bool {
        if case .write = self { return true }
        return false
    }
}

/// A small seeded generator, so a failing seed fails again.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
