import Testing
@testable import PeerKit

/// What becomes of a peer that has no connection left, decided without I/O: suspended (feature
/// resume) or disconnected, and how it is redialled.
@Suite("A peer's loss of its last connection")
struct PeerLossTests {
    typealias Session = PeerSession<String>
    typealias Reason = ConnectionStateMachine.CloseReason

    /// A session whose connection is new: the peer's resume has not arrived on it.
    func resuming() -> Session {
        var session = Session(limits: .init(maximumUnacknowledgedBytes: 1 << 20), remoteIncarnation: "peer-run", fingerprint: nil)
        _ = session.connected()
        return session
    }

    /// A session the peer resumed: frames flow.
    func active() -> Session {
        var session = resuming()
        _ = session.peerResumed(received: 0)
        return session
    }

    func ended() -> Session {
        var session = active()
        _ = session.end(.notRunning)
        return session
    }

    /// What the peer says when our hello reached it after its handshake timeout.
    let helloTimedOut: Reason = .peerFailed(reason: "\(ConnectionStateMachine.helloTimeoutReason) 5 s")

    func loss(_ reason: Reason, _ session: Session?, direction: TieBreak.Direction = .outbound, peerDialsUs: Bool = true, refused: Bool = false) -> PeerLoss {
        PeerLoss.connectionClosed(reason, direction: direction, session: session, peerDialsUs: peerDialsUs, refused: refused)
    }

    @Test("a connection that died as networks fail suspends a peer with a live session, resuming or active",
          arguments: [Reason.connectionLost, .transportError("Connection reset by peer"), .failed(.timedOut(silence: .seconds(3)))])
    func networkFailureSuspends(reason: Reason) {
        #expect(loss(reason, active()) == .suspend(heardUsLate: false))
        #expect(loss(reason, resuming()) == .suspend(heardUsLate: false))
        #expect(loss(reason, active(), direction: .inbound) == .suspend(heardUsLate: false))
    }

    @Test("what either side decided disconnects the peer, session or not",
          arguments: [Reason.stopped, .duplicate, .peerSaidBye(reason: nil), .peerSaidBye(reason: "shutting down"),
                      .failed(.malformed("not JSON")), .failed(.tooSlow(queuedBytes: 100, limit: 10, grace: .seconds(10))),
                      .failed(.limitExceeded("too many groups")), .peerFailed(reason: "it sent a message before peerkit.resend")])
    func decisionsDisconnect(reason: Reason) {
        #expect(loss(reason, active()) == .disconnect(redial: true))
        #expect(loss(reason, resuming()) == .disconnect(redial: true))
        #expect(loss(reason, nil) == .disconnect(redial: true))
    }

    @Test("without a live session (none, or ended), even a lost connection disconnects the peer")
    func noLiveSession() {
        #expect(loss(.connectionLost, nil) == .disconnect(redial: true))
        #expect(loss(.connectionLost, ended()) == .disconnect(redial: true))
        #expect(loss(helloTimedOut, ended()) == .disconnect(redial: true))
    }

    @Test("a security refusal disconnects without a redial (until the peer is discovered again)")
    func refusalIsNotRedialled() {
        let wrongKey = Reason.refused(.connectionClosed(peer: "x"), notice: nil)
        #expect(loss(wrongKey, nil, refused: true) == .disconnect(redial: false))
        #expect(loss(wrongKey, active(), refused: true) == .disconnect(redial: false))
    }

    @Test("the peer timing out our hello before it resumed suspends it; the redial waits only when we dialled and the peer dials us too")
    func peerHeardUsLate() {
        #expect(loss(helloTimedOut, resuming(), direction: .outbound, peerDialsUs: true) == .suspend(heardUsLate: true))
        // Discovery on our side only: nobody else would dial, so it is redialled at once.
        #expect(loss(helloTimedOut, resuming(), direction: .outbound, peerDialsUs: false) == .suspend(heardUsLate: false))
        // Its own dial: our redials do not compete with it.
        #expect(loss(helloTimedOut, resuming(), direction: .inbound, peerDialsUs: true) == .suspend(heardUsLate: false))
    }

    @Test("the peer's hello timeout after it resumed on the connection is its decision: the peer is disconnected")
    func helloTimeoutAfterResumeDisconnects() {
        #expect(loss(helloTimedOut, active()) == .disconnect(redial: true))
        #expect(!PeerLoss.peerFailedBeforeResuming(helloTimedOut, session: active()))
        #expect(PeerLoss.peerFailedBeforeResuming(helloTimedOut, session: resuming()))
        #expect(!PeerLoss.peerFailedBeforeResuming(.peerFailed(reason: "admission refused"), session: resuming()))
    }

    @Test("a tie-break's winner that never arrives suspends a peer with a live session, and disconnects (and redials) one without")
    func winnerNeverArrived() {
        #expect(PeerLoss.winnerNeverArrived(session: active()) == .suspend(heardUsLate: false))
        #expect(PeerLoss.winnerNeverArrived(session: resuming()) == .suspend(heardUsLate: false))
        #expect(PeerLoss.winnerNeverArrived(session: ended()) == .disconnect(redial: true))
        #expect(PeerLoss.winnerNeverArrived(session: Session?.none) == .disconnect(redial: true))
    }
}
