@testable import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// Heartbeats and peer expiry on a ``TestNetwork``: real transceivers, a test clock advanced by
/// hand. Defaults: pings after 1.25 s of silence, ticks every 0.25 s, peer timeout 2.5 s.
@Suite("Heartbeats and peer expiry on a test clock")
struct HeartbeatTests {
    @Test("a peer that stops answering pings is reported disconnected at the peer timeout, with the reason, and not before")
    func silentPeerExpires() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let mute = network.startFakePeer(named: "mute")
        let events = EventRecorder(alice, on: network)
        try await network.eventually("alice connected to mute") { alice.connectedPeers.map(\.name) == ["mute"] }
        mute.answersPings = false

        await network.advance(by: .milliseconds(2400))
        #expect(alice.connectedPeers.map(\.name) == ["mute"], "2.4 s of silence is under the 2.5 s peer timeout")

        await network.advance(by: .milliseconds(100))
        let event = try await events.waitFor("mute reported disconnected") {
            if case .peerDisconnected = $0 { true } else { false }
        }
        guard case let .peerDisconnected(peer, reason?) = event, reason.code == .peerTimedOut, let silence = reason.silence else {
            Issue.record("expected a timeout, got \(event)")
            return
        }
        #expect(peer.name == "mute")
        #expect(silence == .milliseconds(2500))
        #expect(alice.connectedPeers.isEmpty)
        await network.shutdown()
    }

    @Test("a peer that answers pings stays connected through ten seconds of idle link (eight heartbeat intervals)")
    func answeringPeerStays() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        network.startFakePeer(named: "chatty")
        let events = EventRecorder(alice, on: network)
        try await network.eventually("alice connected to chatty") { alice.connectedPeers.count == 1 }

        await network.advance(by: .seconds(10))
        #expect(alice.connectedPeers.map(\.name) == ["chatty"])
        #expect(!events.events.contains { if case .peerDisconnected = $0 { true } else { false } })
        await network.shutdown()
    }

    @Test("two idle transceivers keep each other alive with pings and pongs for ten seconds")
    func idleTransceiversStay() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        await network.advance(by: .seconds(10))
        #expect(alice.connectedPeers.map(\.name) == ["bob"])
        #expect(bob.connectedPeers.map(\.name) == ["alice"])
        #expect(events.events.isEmpty, "nothing happened: \(events.events)")
        await network.shutdown()
    }

    @Test("a partition is noticed by both sides at the peer timeout (without sessions: disconnected; with them, SessionResumeTests: suspended)")
    func partitionExpiresBothSides() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") { $0.resumesSessions = false }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)

        network.partition(alice, bob)
        await network.advance(by: .milliseconds(2400))
        #expect(alice.connectedPeers.count == 1 && bob.connectedPeers.count == 1)
        await network.advance(by: .milliseconds(100))
        try await network.eventually("both sides dropped the other") {
            alice.connectedPeers.isEmpty && bob.connectedPeers.isEmpty
        }
        await network.shutdown()
    }

    @Test("a broadcast to a peer whose outbox is full disconnects it as too slow at once, and never queues past the limit")
    func slowReaderOfBroadcasts() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") {
            $0.maximumQueuedOutboundBytes = 1 << 20
            $0.slowPeerGracePeriod = .seconds(2)
            // The outbox's own bound; a session's (maximumUnacknowledgedBytes) is SessionResumeTests'.
            $0.resumesSessions = false
        }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        network.stopReading(bob, from: alice)
        let chunk = Chunk(bytes: String(repeating: "x", count: 64 * 1024))
        var mostQueued = 0
        for _ in 0..<40 {
            alice.broadcast(chunk)
            mostQueued = max(mostQueued, alice.session?.manager.connection(to: bob.peerID)?.queuedOutboundBytes ?? 0)
        }
        // Within the limit plus one frame, at every moment: the broadcasts past it were not queued.
        #expect(mostQueued <= (1 << 20) + 64 * 1024 + 256, "queued \(mostQueued) bytes")
        let event = try await events.waitFor("bob disconnected as too slow") {
            if case .peerDisconnected = $0 { true } else { false }
        }
        guard case let .peerDisconnected(_, reason?) = event, reason.code == .peerTooSlow else {
            Issue.record("expected peerTooSlow, got \(event)")
            return
        }
        await network.shutdown()
    }

    @Test("broadcasts to peers that do not read are one buffer for all: they do not spend the process-wide budget, and no peer is disconnected for it", arguments: [false, true])
    func broadcastsDoNotSpendTheBudget(sessions: Bool) async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") {
            $0.maximumQueuedOutboundBytes = 8 << 20
            $0.maximumTotalQueuedOutboundBytes = 2 << 20
            $0.slowPeerGracePeriod = .seconds(1)
            $0.resumesSessions = sessions
        }
        var others: [PeerTransceiver] = []
        for name in ["bob", "carol", "dave"] {
            let other = try await network.startTransceiver(named: name)
            try await network.waitUntilConnected(alice, other)
            others.append(other)
        }
        let events = EventRecorder(alice, on: network)
        for other in others { network.stopReading(other, from: alice) }

        // 2 MiB to each of three peers: 6 MiB if each peer's copy were counted, three times the
        // budget; it is one buffer per message, shared by the three queues.
        let chunk = Chunk(bytes: String(repeating: "x", count: 64 * 1024))
        for _ in 0..<32 { alice.broadcast(chunk) }
        let manager = try #require(alice.session?.manager)
        for other in others {
            let queued = manager.connection(to: other.peerID)?.queuedOutboundBytes ?? 0
            #expect(queued > 1 << 20, "\(other.peerID): \(queued) bytes queued")
        }
        #expect(manager.outboundBudget.total == 0, "broadcasts charged \(manager.outboundBudget.total) bytes to the budget")
        // Past the 1 s grace period, before the others' 2.5 s peer timeout (they read nothing).
        await network.advance(by: .milliseconds(1750))
        #expect(alice.connectedPeers.count == 3)
        #expect(!events.events.contains { if case .peerDisconnected = $0 { true } else { false } }, "\(events.events)")
        await network.shutdown()
    }

    @Test("replies a peer reads and never acknowledges are charged to the budget while its session keeps them: the process holds at most the budget plus one reply per peer, others are still answered, and the peer is disconnected as too slow")
    func unacknowledgedRepliesSpendTheBudget() async throws {
        let network = TestNetwork()
        let budget = 1 << 20
        let alice = try await network.startTransceiver(named: "alice") {
            $0.maximumTotalQueuedOutboundBytes = budget
            $0.slowPeerGracePeriod = .seconds(1)
            $0.resumesSessions = true
        }
        let chunk = Chunk(bytes: String(repeating: "x", count: 64 * 1024))
        alice.respond(to: SessionQuestion.self) { _, _ in chunk }
        let bob = try await network.startTransceiver(named: "bob") { $0.resumesSessions = true }
        let carol = try await network.startTransceiver(named: "carol") { $0.resumesSessions = true }
        try await network.waitUntilConnected(alice, bob)
        try await network.waitUntilConnected(alice, carol)
        let manager = try #require(alice.session?.manager)
        let events = EventRecorder(alice, on: network)

        // Bob reads every reply and acknowledges none: alice's session keeps them all for a resend.
        network.dropFrames(from: bob, to: alice) { $0.type == "peerkit.ack" }
        let toAlice = try #require(bob.connectedPeers.first { $0.name == "alice" })
        let asking = Task {
            await withTaskGroup { group in
                for n in 0..<64 {
                    group.addTask { _ = try? await bob.request(SessionQuestion(n: n), to: toAlice, expecting: Chunk.self, timeout: .seconds(60)) }
                }
            }
        }
        try await network.eventually("bob's unacknowledged replies spend alice's budget") { manager.outboundBudget.isSpent }
        // At most the budget plus one reply per peer, at every sample, up to when nothing more
        // happens without the clock moving.
        let bound = budget + 2 * (70 * 1024 + PeerConnection.perFrameOverhead)
        var peak = manager.outboundBudget.total
        for _ in 0..<5 {
            await network.settle()
            peak = max(peak, manager.outboundBudget.total)
        }
        #expect(peak <= bound, "alice held \(peak) bytes charged to a \(budget)-byte budget")

        // Carol, who acknowledges, is still answered while bob holds the budget.
        let toAliceFromCarol = try #require(carol.connectedPeers.first { $0.name == "alice" })
        let answer = try await carol.request(SessionQuestion(n: 1), to: toAliceFromCarol, expecting: Chunk.self, timeout: .seconds(60))
        #expect(answer.bytes.count == chunk.bytes.count)

        // The grace period counts from the first heartbeat check that sees alice's budget held,
        // on the next beat at the latest (a whole multiple of the 1.25 s heartbeat interval: a
        // connection is looked at on every beat, not every tick); then every tick. Past the 1 s
        // grace period after that: bob is disconnected as too slow.
        await network.advance(by: .milliseconds(2250))
        let event = try await events.waitFor("bob disconnected as too slow") {
            if case let .peerDisconnected(peer, _) = $0 { peer.name == "bob" } else { false }
        }
        guard case let .peerDisconnected(_, reason?) = event, reason.code == .peerTooSlow else {
            Issue.record("expected peerTooSlow, got \(event)")
            return
        }
        // His session ended with the connection, and gave its share back.
        network.clearFaults()
        await network.advance(by: .milliseconds(100))
        try await network.eventually("the budget is given back") { manager.outboundBudget.total < budget / 2 }
        asking.cancel()
        await network.shutdown()
        #expect(manager.outboundBudget.total == 0, "after the stop, nothing is left charged: \(manager.outboundBudget.total) bytes")
    }

    @Test("a send to a peer that does not read waits for the grace period, then throws peerTooSlow and the peer is disconnected")
    func slowReaderOfSends() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") {
            $0.slowPeerGracePeriod = .seconds(2)
        }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)
        let bobPeer = try #require(alice.connectedPeers.first)

        network.stopReading(bob, from: alice)
        let chunk = Chunk(bytes: String(repeating: "x", count: 64 * 1024))
        let sending = Task.immediate {
            // Paced: the sends queue up to the outbox's high-water mark (1 MiB), then one waits.
            for _ in 0..<40 { try await alice.send(chunk, to: [bobPeer]) }
        }
        try await network.eventually("a send waits for bob to read") {
            (alice.session?.manager.connection(to: bob.peerID)?.queuedOutboundBytes ?? 0) > 1 << 20
        }
        await network.advance(by: .milliseconds(1750))
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "within the 2 s grace period")
        await network.advance(by: .milliseconds(500))
        let result = await sending.result
        guard case let .failure(error as PeerKitError) = result, error.code == .peerTooSlow else {
            Issue.record("the send ended with \(result)")
            return
        }
        let event = try await events.waitFor("bob disconnected as too slow") {
            if case .peerDisconnected = $0 { true } else { false }
        }
        guard case let .peerDisconnected(_, reason?) = event, reason.code == .peerTooSlow else {
            Issue.record("expected peerTooSlow, got \(event)")
            return
        }
        await network.shutdown()
    }
}
}

struct Chunk: Codable, Sendable {
    var bytes: String
}
