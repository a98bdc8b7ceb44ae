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

    /// A frame read while a delayed one is being passed on must queue behind it. The relay used
    /// to take a due frame off its queue before the write reached the event loop, so a frame
    /// read in between found the queue empty and went first: a session's `peerkit.resend`
    /// arrived after the message behind it (`SessionFaultScheduleTests`, seed 2, once).
    @Test("frames keep their order when a delay ends while the sender goes on")
    func delayEndsUnderStream() async throws {
        let network = TestNetwork()
        let (alice, bob, received) = try await pair(network)
        var sent = 0
        for _ in 0..<100 {
            // Frames delayed, then the delay ends: the clock moves (the delayed frames are passed
            // on) while alice sends more, which the relay reads as the queue empties.
            network.delayFrames(from: alice, to: bob, by: .microseconds(100))
            for _ in 0..<5 {
                sent += 1
                alice.broadcast(Numbered(n: sent))
            }
            await network.settle()
            network.clearFaults()
            let first = sent + 1
            sent += 20
            let stream = Task {
                for n in first...(first + 19) {
                    alice.broadcast(Numbered(n: n))
                    await Task.yield()
                }
            }
            await network.advance(by: .microseconds(100))
            await stream.value
        }
        let total = sent
        try await network.eventually("bob received every message") { received.withLockedValue { $0.count } == total }
        let order = received.withLockedValue { $0 }
        let firstOutOfOrder = zip(order, 1...total).first { $0 != $1 }
        #expect(firstOutOfOrder == nil, "bob received \(firstOutOfOrder.map { "\($0.0) where \($0.1) was due" } ?? "")")
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

    @Test("eventually fails, naming what never happened and what kept the network busy, when it never goes quiet")
    func eventuallyNamesWhatKeptItBusy() async throws {
        let network = TestNetwork()
        let (alice, bob, _) = try await pair(network)
        // Bob's handler does not return until the end: its message keeps the network busy.
        let (gate, open) = AsyncStream<Void>.makeStream()
        bob.receive(Note.self) { _ in
            for await _ in gate {}
        }
        alice.broadcast(Note(text: "held"))
        let error = await #expect(throws: TestNetworkError.self) {
            try await network.eventually("something that never happens") { false }
        }
        #expect(error == .stayedBusy("something that never happens", busy: "bob has a message waiting for its handler or in it"))
        #expect(error.map { "\($0)" }?.contains("the network never went quiet") == true)
        #expect(network.elapsed == .zero)
        open.finish()
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
