import Testing
@testable import PeerKit

/// The sentences of the resumable sessions' error codes, word for word.
@Suite("PeerKitError sentences (sessions)")
struct SessionErrorSentenceTests {
    static let peer = "the peer \"Kitchen\" at 127.0.0.1:5000"

    @Test("each session error says what happened, names its limit or window, and what to do")
    func sentences() {
        let full = PeerKitError.sessionBufferFull(peer: Self.peer, unacknowledgedBytes: 8388608, limit: 8388608)
        #expect(full.description == "The peer \"Kitchen\" at 127.0.0.1:5000 has 8388608 bytes sent to it and not yet acknowledged, at the 8388608-byte limit (PeerConfiguration.maximumUnacknowledgedBytes), so this was not sent. Its link is probably down; send again once it is back (peerResumed), or raise the limit.")
        #expect(full.code == .sessionBufferFull)
        #expect(full.unacknowledgedBytes == 8388608)
        #expect(full.limit == 8388608)
        let expired = PeerKitError.sessionExpired(peer: Self.peer, window: .seconds(30))
        #expect(expired.description == "The peer \"Kitchen\" at 127.0.0.1:5000 was unreachable for longer than its 30 s resume window (PeerConfiguration.sessionResumeWindow), so it was disconnected and what was pending for it was dropped.")
        #expect(expired.window == .seconds(30))
        let restarted = PeerKitError.peerRestarted(peer: Self.peer)
        #expect(restarted.description == "The peer \"Kitchen\" at 127.0.0.1:5000 restarted (it came back as a new process, so its session could not resume); what was pending for its previous run was dropped.")
        let ended = PeerKitError.peerEndedSession(peer: Self.peer, lostMessages: 6)
        #expect(ended.description == "The peer \"Kitchen\" at 127.0.0.1:5000 ended its side of the session while this side kept it (its resume window ran out first, or it reached a limit), so 6 messages sent to it and not acknowledged may not have arrived, and requests waiting on it failed. It is connected again, in a new session; send again what must arrive.")
        #expect(ended.code == .peerEndedSession)
        #expect(ended.lostMessages == 6)
        let exited = PeerKitError.peerExited(peer: Self.peer, refusals: "connecting to 127.0.0.1:5000 failed: connect(descriptor:addr:size:): Connection refused (errno: 111)")
        #expect(exited.description == "The peer \"Kitchen\" at 127.0.0.1:5000 is gone: its connection closed without a goodbye, and then connecting to 127.0.0.1:5000 failed: connect(descriptor:addr:size:): Connection refused (errno: 111), so nothing listens there any more and its session cannot resume. What was pending for it was dropped; it is connected again if it starts again.")
        #expect(exited.code == .peerExited)
        #expect(exited.reason == "connecting to 127.0.0.1:5000 failed: connect(descriptor:addr:size:): Connection refused (errno: 111)")
        let nothingLost = PeerKitError.peerEndedSession(peer: Self.peer, lostMessages: 0)
        #expect(nothingLost.description == "The peer \"Kitchen\" at 127.0.0.1:5000 ended its side of the session while this side kept it (its resume window ran out first, or it reached a limit), so nothing sent to it was lost, but requests waiting on it failed (their replies went with its side). It is connected again, in a new session; send those requests again.")
    }
}
