import NIOConcurrencyHelpers
import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// The test kit's own behaviour: faults do what they say, and waiting fails fast.
@Suite("TestNetwork faults and waiting")
struct TestNetworkTests {
    /// Alice and bob, connected; bob records the ``Numbered`` messages it receives.
    private func pair(_ network: TestNetwork) async throws -> (PeerTransceiver, PeerTransceiver, NIOLockedValueBox<[Int]>) {
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        let received = NIOLockedValueBox<[Int]>([])
        bob.receive(Numbered.self) { message in received.withLockedValue { $0.append(message.n) } }
        try await network.waitUntilConnected(alice, bob)
        return (alice, bob, received)
    }

    @Test("frames a drop rule matches never arrive; the others do, in order, and the connection stays up")
    func dropFrames() async throws {
        let network = TestNetwork()
        let (alice, bob, received) = try await pair(network)
        network.dropFrames(from: alice, to: bob) { $0.type == "Note" }
        alice.broadcast(Numbered(n: 1))
        alice.broadcast(Note(text: "lost"))
        alice.broadcast(Numbered(n: 2))
        try await network.eventually("bob received 1 and 2") { received.withLockedValue { $0.count } == 2 }
        #expect(received.withLockedValue { $0 } == [1, 2])
        #expect(bob.connectedPeers.map(\.name) == ["alice"])
        await network.shutdown()
    }

    @Test("delayed frames arrive when the clock reaches their delay, in the order they were sent")
    func delayFrames() async throws {
        let network = TestNetwork()
        let (alice, bob, received) = try await pair(network)
        network.delayFrames(from: alice, to: bob, by: .milliseconds(300))
        for n in 1...5 { alice.broadcast(Numbered(n: n)) }
        await network.settle()
        #expect(received.withLockedValue { $0 }.isEmpty)
        await network.advance(by: .milliseconds(300))
        try await network.eventually("bob received all five") { received.withLockedValue { $0.count } == 5 }
        #expect(received.withLockedValue { $0 } == [1, 2, 3, 4, 5])
        await network.shutdown()
    }

    @Test("eventually fails at once, naming what never happened, when the network is quiet")
    func eventuallyFailsFast() async throws {
        let network = TestNetwork()
        _ = try await network.startTransceiver(named: "alone")
        let error = await #expect(throws: TestNetworkError.self) {
            try await network.eventually("a peer arrived") { false }
        }
        #expect(error == .neverHappened("a peer arrived"))
        #expect(network.elapsed == .zero)
        await network.shutdown()
    }

    @Test("a Given-When-Then step that throws names the step")
    func stepNamesItself() async throws {
        let error = await #expect(throws: ScenarioStepFailed.self) {
            try await when("the impossible happens") { throw TestNetworkError.shutDown }
        }
        #expect(error?.step == "When the impossible happens")
        #expect(error?.description == "The step \"When the impossible happens\" failed: The test network shut down.")
    }
}
}
