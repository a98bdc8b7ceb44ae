import Testing
@testable import PeerKit

/// `PeerKitError` as a struct with codes: made, compared and matched as the enum it replaced was.
@Suite("PeerKitError (codes, values, sentences)")
struct PeerKitErrorTests {
    @Test("an error made with a case-named function has that code, its values and the enum's sentence")
    func madeLikeACase() {
        let error = PeerKitError.requestTimedOut(type: "Question", peer: "peer \"hub\"", timeout: .milliseconds(2500))
        #expect(error.code == .requestTimedOut)
        #expect(error.type == "Question")
        #expect(error.peer == "peer \"hub\"")
        #expect(error.timeout == .milliseconds(2500))
        #expect(error.reason == nil)
        #expect(error.description == "peer \"hub\" did not answer the Question request within 2.5 s.")

        let tooSlow = PeerKitError.peerTooSlow(peer: "p", queuedBytes: 5, limit: 4, grace: .seconds(1))
        #expect(tooSlow.code == .peerTooSlow)
        #expect(tooSlow.queuedBytes == 5 && tooSlow.limit == 4 && tooSlow.grace == .seconds(1))
        #expect(tooSlow.description == "p did not read what was sent to it: 5 bytes waited to be sent, over the 4-byte limit (PeerConfiguration.maximumQueuedOutboundBytes), for more than 1 s, so it was disconnected. Send less to it, or raise the limit.")

        let badType = PeerKitError.invalidServiceType("Bad_Type", reason: "it contains \"_\"")
        #expect(badType.code == .invalidServiceType)
        #expect(badType.serviceType == "Bad_Type" && badType.reason == "it contains \"_\"")
        #expect(PeerKitError.notRunning.description == "The transceiver is not running; call resume() before sending.")
    }

    @Test("errors are equal when code and values are; codes tell the kinds apart")
    func equality() {
        #expect(PeerKitError.peerNotConnected(peer: "a") == .peerNotConnected(peer: "a"))
        #expect(PeerKitError.peerNotConnected(peer: "a") != .peerNotConnected(peer: "b"))
        #expect(PeerKitError.connectionClosed(peer: "a") != .peerNotConnected(peer: "a"))
        #expect(PeerKitError.connectionClosed(peer: "a").code != PeerKitError.peerNotConnected(peer: "a").code)
        let set: Set<PeerKitError> = [.notRunning, .notRunning, .connectionClosed(peer: "a")]
        #expect(set.count == 2)
        #expect(PeerKitError.Code.remoteError.description == "remoteError")
    }

    @Test("a thrown error is matched by its code, and by #expect(throws:) with its values")
    func matching() throws {
        func fail() throws { throw PeerKitError.noPeerFound(serviceType: "listrctl", timeout: .seconds(5)) }
        #expect(throws: PeerKitError.noPeerFound(serviceType: "listrctl", timeout: .seconds(5))) { try fail() }
        do {
            try fail()
            Issue.record("fail() did not throw")
        } catch let error as PeerKitError where error.code == .noPeerFound {
            #expect(error.serviceType == "listrctl")
            #expect(error.timeout == .seconds(5))
        }
        #expect(PeerKitError.admissionRefused(peer: "x").isSecurityRefusal)
        #expect(!PeerKitError.remoteError(reason: "no handler", peer: "x").isSecurityRefusal)
    }
}
