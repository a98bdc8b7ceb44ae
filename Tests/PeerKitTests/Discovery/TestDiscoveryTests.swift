import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// Discovery events as the connection layer sees them, scripted by a ``TestNetwork``.
@Suite("Discovery scripted by a test network")
struct TestDiscoveryTests {
    @Test("a peer that appears is added and connected; one that disappears stays while connected and is removed once it stops")
    func appearAndDisappear() async throws {
        let network = TestNetwork()
        // Without a session: a killed bob is disconnected at once (a session would keep it suspended).
        let alice = try await network.startTransceiver(named: "alice") { $0.resumesSessions = false }
        let events = EventRecorder(alice, on: network)
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        #expect(events.events.first == .peerAdded(Peer(id: bob.peerID, name: "bob", isConnected: false)))

        network.disappear(bob)
        await network.settle()
        #expect(alice.availablePeers.map(\.name) == ["bob"], "connected, so still available")

        network.kill(bob)
        try await events.waitFor("bob removed") { if case .peerRemoved = $0 { true } else { false } }
        #expect(alice.availablePeers.isEmpty)
        await network.advance(by: .seconds(5))
        #expect(network.connectionAttempts(from: alice, to: bob).count == 1, "not redialled: its advertisement is gone")
        await network.shutdown()
    }

    @Test("a peer hidden from one member only is seen and dialled by the others")
    func hiddenFromOne() async throws {
        let network = TestNetwork()
        let bob = network.startFakePeer(named: "bob")
        let carol = PeerTransceiver(configuration: network.configuration(named: "carol"))
        network.setVisible(false, bob, to: carol)
        try await carol.start()
        let alice = try await network.startTransceiver(named: "alice")
        try await network.eventually("alice connected to bob") { alice.connectedPeers.map(\.name).contains("bob") }
        await network.settle()
        #expect(!carol.availablePeers.map(\.name).contains("bob"))

        network.setVisible(true, bob, to: carol)
        try await network.eventually("carol connected to bob") { carol.connectedPeers.map(\.name).contains("bob") }
        await carol.shutdown()
        await network.shutdown()
    }

    @Test("a name collision renames the second peer to \"name #2\"; its peers show the new name")
    func nameCollision() async throws {
        let network = TestNetwork()
        let first = try await network.startTransceiver(named: "kitchen")
        let second = try await network.startTransceiver(named: "kitchen")
        let observer = try await network.startTransceiver(named: "observer")
        try await network.waitUntilConnected(first, second, observer)
        try await network.eventually("the observer shows both names") {
            observer.connectedPeers.map(\.name) == ["kitchen", "kitchen #2"]
        }
        #expect(observer.connectedPeers.first { $0.id == second.peerID }?.name == "kitchen #2")
        #expect(first.connectedPeers.map(\.name) == ["kitchen #2", "observer"])
        await network.shutdown()
    }
}
}
