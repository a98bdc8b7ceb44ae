import NIOConcurrencyHelpers
import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// How a connection ends, each way, on a ``TestNetwork``: what the survivor reports and does.
@Suite("A connection's close paths on a test network")
struct ClosePathTests {
    private func disconnection(of name: String, in events: EventRecorder) async throws -> (Peer, PeerKitError?) {
        let event = try await events.waitFor("\(name) reported disconnected") {
            if case let .peerDisconnected(peer, _) = $0 { peer.name == name } else { false }
        }
        guard case let .peerDisconnected(peer, reason) = event else { throw TestNetworkError.neverHappened("a disconnection") }
        return (peer, reason)
    }

    @Test("a peer that stops says bye: it is reported disconnected without an error, then removed")
    func bye() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        await bob.shutdown()
        let (peer, reason) = try await disconnection(of: "bob", in: events)
        #expect(peer == Peer(id: bob.peerID, name: "bob", isConnected: false))
        #expect(reason == nil)
        try await events.waitFor("bob removed") { if case .peerRemoved = $0 { true } else { false } }
        #expect(alice.availablePeers.isEmpty)
        await network.shutdown()
    }

    /// The test network used to pass a side's end of output on at once, ahead of its delayed
    /// frames: the survivor saw the connection end without a bye, lost the messages, and, with
    /// sessions, suspended a peer that had stopped.
    @Test("a peer that stops while its frames arrive late: its last messages and then its bye arrive, in that order")
    func byeBehindLateFrames() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        let received = NIOLockedValueBox<[Int]>([])
        alice.receive(Numbered.self) { message in received.withLockedValue { $0.append(message.n) } }
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        network.delayFrames(from: bob, to: alice, by: .milliseconds(500))
        for n in 1...3 { bob.broadcast(Numbered(n: n)) }
        let stopping = Task { await bob.shutdown() }
        await network.advance(by: .milliseconds(500))
        let (_, reason) = try await disconnection(of: "bob", in: events)
        await stopping.value
        #expect(reason == nil, "bob's bye did not arrive: \(String(describing: reason))")
        #expect(received.withLockedValue { $0 } == [1, 2, 3])
        #expect(!events.events.contains { if case .peerSuspended = $0 { true } else { false } })
        await network.shutdown()
    }

    @Test("without sessions, a peer killed without a bye is reported disconnected with connectionClosed, at once, without waiting for the heartbeat")
    func killedWithoutBye() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") { $0.resumesSessions = false }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        network.kill(bob)
        let (_, reason) = try await disconnection(of: "bob", in: events)
        guard let reason, reason.code == .connectionClosed, let peer = reason.peer else {
            Issue.record("expected connectionClosed, got \(String(describing: reason))")
            return
        }
        #expect(peer.hasPrefix("\"bob\""))
        #expect(network.elapsed == .zero, "no time passed: the closed socket said it")
        await network.shutdown()
    }

    @Test("with a session, a peer killed without a bye is reported suspended with connectionClosed, at once, and not disconnected")
    func killedWithoutByeSuspends() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        network.kill(bob)
        let event = try await events.waitFor("bob suspended") { if case .peerSuspended = $0 { true } else { false } }
        guard case let .peerSuspended(peer, reason) = event, reason?.code == .connectionClosed else {
            Issue.record("expected bob suspended with connectionClosed, got \(event)")
            return
        }
        #expect(peer.name == "bob")
        #expect(network.elapsed == .zero, "no time passed: the closed socket said it")
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "suspended, within its resume window: still connected for the user")
        #expect(!events.events.contains { if case .peerDisconnected = $0 { true } else { false } })
        await network.shutdown()
    }

    @Test("a peer that sends bytes that are not a frame of JSON is disconnected with the protocol violation, and told why")
    func protocolViolation() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        _ = try await network.startTransceiver(named: "bob")
        let rogue = network.startFakePeer(named: "rogue")
        try await network.eventually("alice connected to bob and rogue") { alice.connectedPeers.count == 2 }
        let events = EventRecorder(alice, on: network)

        rogue.sendRaw([0, 0, 0, 5] + Array("hello".utf8))
        let (_, reason) = try await disconnection(of: "rogue", in: events)
        guard reason?.code == .malformedFrame else {
            Issue.record("expected a protocol violation, got \(String(describing: reason))")
            return
        }
        try await network.eventually("rogue was told why") { !rogue.errorsReceived.isEmpty }
        #expect(rogue.errorsReceived.first?.hasPrefix("Closing the connection") == true)
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "everyone else goes on")
        await network.shutdown()
    }

    @Test("a peer that never completes its handshake is closed at the handshake timeout")
    func handshakeTimeout() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        // The fake's hello is lost: alice's side of the connection never completes its handshake.
        // (The rule is in place before the fake is advertised: it says hello as soon as alice connects.)
        let mute = network.startFakePeer(named: "mute") { mute in
            network.dropFrames(from: mute, to: alice) { $0.type == "peerkit.hello" }
        }
        try await network.eventually("mute saw alice's hello") { mute.connectedPeers.count == 1 }

        await network.advance(by: .milliseconds(4750))
        #expect(mute.connectedPeers.count == 1, "under the 5 s handshake timeout")
        await network.advance(by: .milliseconds(500))
        try await network.eventually("alice closed the connection") { mute.connectedPeers.isEmpty }
        #expect(mute.errorsReceived.contains { $0.contains("no peerkit.hello arrived within 5.0 s") })
        #expect(alice.connectedPeers.isEmpty)
        await network.shutdown()
    }
}
}
