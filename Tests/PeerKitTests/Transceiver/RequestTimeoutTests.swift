import NIOConcurrencyHelpers
import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// Request timeouts and cancellation on a ``TestNetwork``: the 5 s timeout passes when the test
/// clock says so, and a cancellation ends a request with no time passing at all.
@Suite("Request timeout and cancellation on a test clock")
struct RequestTimeoutTests {
    /// Alice and bob, connected; bob receives ``Question``s but never answers them.
    /// `sessions`: whether alice keeps a resumable session with bob (then a killed bob is suspended
    /// and a request to him keeps its own timeout, as `SessionResumeTests` shows).
    private func aliceAndSilentBob(_ network: TestNetwork, sessions: Bool = true) async throws -> (PeerTransceiver, PeerTransceiver, Peer) {
        let alice = try await network.startTransceiver(named: "alice") { $0.resumesSessions = sessions }
        let bob = try await network.startTransceiver(named: "bob")
        bob.receive(Question.self) { _ in }
        try await network.waitUntilConnected(alice, bob)
        let bobPeer = try #require(alice.connectedPeers.first)
        return (alice, bob, bobPeer)
    }

    @Test("a request with no reply throws requestTimedOut when its timeout passes on the clock, and not before")
    func timeout() async throws {
        let network = TestNetwork()
        let (alice, _, bob) = try await aliceAndSilentBob(network)
        let ended = NIOLockedValueBox(false)
        // Task.immediate: the request is sent, and its timeout set, before the clock moves.
        let request = Task.immediate {
            defer { ended.withLockedValue { $0 = true } }
            return try await alice.request(Question(text: "?"), to: bob, expecting: Answer.self, timeout: .seconds(5))
        }
        await network.advance(by: .milliseconds(4900))
        #expect(!ended.withLockedValue { $0 }, "4.9 s is under the 5 s timeout")

        await network.advance(by: .milliseconds(100))
        let error = await #expect(throws: PeerKitError.self) { try await request.value }
        #expect(error == .requestTimedOut(type: "Question", peer: "bob", timeout: .seconds(5)))
        #expect(alice.connectedPeers.count == 1, "a timeout does not touch the connection")
        await network.shutdown()
    }

    @Test("a request made from an already cancelled task throws CancellationError with no time passing (was: hung until its timeout)")
    func cancelledBeforeSending() async throws {
        let network = TestNetwork()
        let (alice, bob, bobPeer) = try await aliceAndSilentBob(network)
        let received = NIOLockedValueBox(0)
        bob.receive(Question.self) { _ in received.withLockedValue { $0 += 1 } }
        let request = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await alice.request(Question(text: "?"), to: bobPeer, expecting: Answer.self, timeout: .seconds(30))
        }
        await #expect(throws: CancellationError.self) { try await request.value }
        await network.settle()
        #expect(network.elapsed == .zero)
        #expect(received.withLockedValue { $0 } == 0, "a request cancelled before it was sent is not sent")
        await network.shutdown()
    }

    @Test("cancelling a request in flight throws CancellationError at once, and its late reply is ignored")
    func cancelledInFlight() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        let answered = NIOLockedValueBox<[String]>([])
        bob.respond(to: Question.self) { question, _ in
            answered.withLockedValue { $0.append(question.text) }
            return Answer(text: question.text, from: "bob")
        }
        try await network.waitUntilConnected(alice, bob)
        let bobPeer = try #require(alice.connectedPeers.first)
        // Bob's answers take a second to arrive.
        network.delayFrames(from: bob, to: alice, by: .seconds(1))

        let request = Task.immediate { try await alice.request(Question(text: "1"), to: bobPeer, expecting: Answer.self) }
        try await network.eventually("bob answered 1") { answered.withLockedValue { $0 } == ["1"] }
        request.cancel()
        await #expect(throws: CancellationError.self) { try await request.value }
        #expect(network.elapsed == .zero)

        await network.advance(by: .seconds(1))
        let next = Task.immediate { try await alice.request(Question(text: "2"), to: bobPeer, expecting: Answer.self) }
        await network.advance(by: .seconds(1))
        #expect(try await next.value == Answer(text: "2", from: "bob"), "the late reply to 1 was not taken for 2")
        await network.shutdown()
    }

    @Test("without sessions, a request to a peer that disconnects fails with the reason its connection ended, without waiting for the timeout")
    func peerLost() async throws {
        let network = TestNetwork()
        let (alice, bob, bobPeer) = try await aliceAndSilentBob(network, sessions: false)
        let request = Task.immediate { try await alice.request(Question(text: "?"), to: bobPeer, expecting: Answer.self, timeout: .seconds(30)) }
        await network.settle()
        network.kill(bob)
        let error = await #expect(throws: PeerKitError.self) { try await request.value }
        guard let error, error.code == .connectionClosed, let peer = error.peer else {
            Issue.record("expected connectionClosed, got \(String(describing: error))")
            return
        }
        #expect(peer.hasPrefix("\"bob\""))
        #expect(network.elapsed == .zero)
        await network.shutdown()
    }

    @Test("waiting for a peer that never comes throws noPeerFound when its timeout passes on the clock")
    func waitForPeerTimesOut() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let waiting = Task.immediate { try await alice.waitForPeer(timeout: .seconds(10)) }
        await network.advance(by: .seconds(10))
        let error = await #expect(throws: PeerKitError.self) { try await waiting.value }
        #expect(error == .noPeerFound(serviceType: "testkit", timeout: .seconds(10)))
        await network.shutdown()
    }
}
}
