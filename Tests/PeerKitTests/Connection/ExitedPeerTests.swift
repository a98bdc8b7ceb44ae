import Glibc
import NIOCore
import PeerKitTesting
import Testing
@testable import PeerKit

/// Which connect failures say that nothing listens at an endpoint: the errors the real sockets,
/// NIO's name resolution and the test network fail a connect with.
@Suite("A refused connection, told from other connect failures")
struct ConnectRefusalTests {
    @Test("ECONNREFUSED is a refusal; a timeout, an unreachable network or another error is not")
    func refusal() {
        #expect(ConnectionManager.isRefusal(IOError(errnoCode: ECONNREFUSED, reason: "connect")))
        #expect(!ConnectionManager.isRefusal(IOError(errnoCode: ETIMEDOUT, reason: "connect")))
        #expect(!ConnectionManager.isRefusal(IOError(errnoCode: EHOSTUNREACH, reason: "connect")))
        #expect(!ConnectionManager.isRefusal(IOError(errnoCode: ENETUNREACH, reason: "connect")))
        #expect(!ConnectionManager.isRefusal(ChannelError.connectTimeout(.seconds(1))))
        #expect(ConnectionManager.isRefusal(TestNetworkError.connectionRefused(port: 2)))
        #expect(!ConnectionManager.isRefusal(TestNetworkError.partitioned))
        #expect(!ConnectionManager.isRefusal(TestNetworkError.killed), "the dialler itself was killed")
    }
}

extension TestNetworkSuites {
/// A peer whose process ended (``TestNetwork/kill(_:)``, as a crash): its connection closes without
/// a bye, so a session keeps it suspended; the first redial finds nothing listening where it was,
/// and its session ends then, not at the end of its 30 s resume window.
@Suite("A suspended peer whose process ended")
struct ExitedPeerTests {
    @Test("it is disconnected with peerExited at its first redial, 0.5 s after the crash; a request waiting on it fails with that error, and so does a send")
    func disconnectedAtFirstRedial() async throws {
        let network = TestNetwork()
        // Without jitter, the first redial of a suspended peer comes 0.5 s after its loss.
        let alice = try await network.startTransceiver(named: "alice") { $0.reconnectBackoff = Backoff(initial: .milliseconds(500), maximum: .seconds(4), jitter: 0) }
        let bob = try await network.startTransceiver(named: "bob")
        bob.receive(Question.self) { _ in }
        try await network.waitUntilConnected(alice, bob)
        let bobPeer = try #require(alice.connectedPeers.first)
        let events = EventRecorder(alice, on: network)

        network.kill(bob)
        try await events.waitFor("bob suspended") { if case .peerSuspended = $0 { true } else { false } }
        // Sent while bob is suspended: it waits in his session.
        let request = Task.immediate {
            try await alice.request(Question(text: "?"), to: bobPeer, expecting: Answer.self, timeout: .seconds(30))
        }
        await network.advance(by: .milliseconds(499))
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "suspended until the redial")

        await network.advance(by: .milliseconds(1))
        let error = await #expect(throws: PeerKitError.self) { try await request.value }
        #expect(error?.code == .peerExited)
        #expect(network.elapsed == .milliseconds(500), "at the first redial, not the 30 s window's end nor the request's timeout")
        let event = try await events.waitFor("bob disconnected") { if case .peerDisconnected = $0 { true } else { false } }
        guard case let .peerDisconnected(peer, reason) = event else { return }
        #expect(peer.name == "bob")
        #expect(reason == error)
        #expect(reason?.description.hasPrefix("Bob is gone: its connection closed without a goodbye, and then connecting to testnetwork:") == true, "\(String(describing: reason))")
        #expect(reason?.description.contains("Nothing listens at port") == true, "the refusal is named: \(String(describing: reason))")
        #expect(alice.connectedPeers.isEmpty)

        let sendError = await #expect(throws: PeerKitError.self) { try await alice.send(Question(text: "again"), to: [bobPeer]) }
        #expect(sendError?.code == .peerExited, "a send says why the peer is not connected")
        await network.shutdown()
    }

    @Test("a peer cut off by a link that is down is not ended: its redials time out, they are not refused")
    func linkDownKeepsSession() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        network.partition(alice, bob)
        await network.advance(by: .seconds(20))
        #expect(events.events.contains { if case .peerSuspended = $0 { true } else { false } })
        #expect(!events.events.contains { if case .peerDisconnected = $0 { true } else { false } }, "within its 30 s window")
        #expect(network.connectionAttempts(from: alice, to: bob).count > 5, "redialled meanwhile")

        network.heal(alice, bob)
        await network.advance(by: .seconds(2))
        try await events.waitFor("bob resumed") { if case .peerResumed = $0 { true } else { false } }
        await network.shutdown()
    }
}
}
