import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// Redialling with back-off on a ``TestNetwork``, with jitter off so that every attempt's time is known.
/// Alice has no resumable session (`resumesSessions` off), so a lost bob is disconnected and
/// `connectedPeers` says so; a suspended peer is redialled the same way (`SessionResumeTests`).
@Suite("Reconnect back-off on a test clock")
struct ReconnectTests {
    static let backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(4), multiplier: 2, jitter: 0)

    @Test("a peer we were connected to that crashed is redialled after 0.5, 1, 2 and 4 s, then every 2 s (the cap for a peer once reached)")
    func backoffAfterCrash() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") { $0.reconnectBackoff = Self.backoff; $0.resumesSessions = false }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let dialsBefore = network.connectionAttempts(from: alice, to: bob).count

        network.kill(bob)
        try await network.eventually("alice lost bob") { alice.connectedPeers.isEmpty }
        await network.advance(by: .seconds(20))

        let redials = network.connectionAttempts(from: alice, to: bob).dropFirst(dialsBefore)
        // Redial 0.5 s after the loss, then after each failure the next delay (0.5, 1, 2, 4, ...),
        // but at most 2 s apart: bob was connected, so its link may come back any moment.
        let cap: Duration = .seconds(2)
        var expected: [Duration] = []
        var time = Self.backoff.delay(attempt: 0, random: 0)
        expected.append(time)
        for attempt in 0..<20 {
            time += min(Self.backoff.delay(attempt: attempt, random: 0), cap)
            if time > .seconds(20) { break }
            expected.append(time)
        }
        #expect(Array(redials) == expected)
        #expect(expected.prefix(7) == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(6), .seconds(8), .seconds(10)])
        await network.shutdown()
    }

    @Test("a suspended peer (feature resume) is redialled 0.5 s after each failed attempt, without back-off, while its resume window lasts")
    func suspendedPeerRedialledEveryHalfSecond() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") { $0.reconnectBackoff = Self.backoff }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        let dialsBefore = network.connectionAttempts(from: alice, to: bob).count
        let events = EventRecorder(alice, on: network)

        // A link that goes down: each redial hangs until the 1 s connect timeout. (A crashed
        // bob would refuse the first redial and end his session: `ExitedPeerTests`.)
        network.partition(alice, bob)
        await network.advance(by: .seconds(15))
        #expect(events.events.contains { if case .peerSuspended = $0 { true } else { false } })

        let redials = Array(network.connectionAttempts(from: alice, to: bob).dropFirst(dialsBefore))
        // Each 1.5 s after the one before: its 1 s connect timeout, then 0.5 s. The back-off's
        // 1, 2 and 4 s steps do not apply to a session waiting to resume.
        let gaps = zip(redials.dropFirst(), redials).map { $0 - $1 }
        #expect(redials.count >= 7, "\(redials)")
        #expect(gaps.allSatisfy { $0 == .milliseconds(1500) }, "\(redials)")
        #expect(!events.events.contains { if case .peerDisconnected = $0 { true } else { false } }, "still within the 30 s window")
        await network.shutdown()
    }

    @Test("a peer never reached is redialled with the configured back-off up to its maximum (4 s here), not the 2 s cap")
    func backoffForAPeerNeverReached() async throws {
        let network = TestNetwork()
        let bob = try await network.startTransceiver(named: "bob")
        network.kill(bob)  // still advertised, as a crashed host's record lingers in mDNS
        let alice = try await network.startTransceiver(named: "alice") { $0.reconnectBackoff = Self.backoff; $0.resumesSessions = false }
        await network.advance(by: .seconds(20))

        let dials = network.connectionAttempts(from: alice, to: bob)
        var expected: [Duration] = [.zero]
        var time: Duration = .zero
        for attempt in 0..<20 {
            time += Self.backoff.delay(attempt: attempt, random: 0)
            if time > .seconds(20) { break }
            expected.append(time)
        }
        #expect(Array(dials) == expected)
        #expect(expected.prefix(6) == [.zero, .milliseconds(500), .milliseconds(1500), .milliseconds(3500), .milliseconds(7500), .milliseconds(11500)])
        await network.shutdown()
    }

    @Test("a partitioned peer is redialled with back-off, each dial given up at the connect timeout, and reconnected once the partition heals")
    func reconnectAfterPartition() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") { $0.reconnectBackoff = Self.backoff; $0.resumesSessions = false }
        let bob = try await network.startTransceiver(named: "bob") { $0.reconnectBackoff = Self.backoff; $0.resumesSessions = false }
        try await network.waitUntilConnected(alice, bob)
        let events = EventRecorder(alice, on: network)

        network.partition(alice, bob)
        await network.advance(by: .seconds(10))
        #expect(alice.connectedPeers.isEmpty && bob.connectedPeers.isEmpty)
        #expect(network.connectionAttempts(from: alice, to: bob).count >= 3, "redialled while partitioned")

        network.heal(alice, bob)
        await network.advance(by: .seconds(6))
        try await network.waitUntilConnected(alice, bob)
        let connections = events.events.filter { if case .peerConnected = $0 { true } else { false } }
        #expect(connections.count == 1)
        await network.shutdown()
    }

    @Test("a new advertisement of a peer being backed off from is dialled at once")
    func newAdvertisementDialsAtOnce() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice") { $0.reconnectBackoff = Backoff(initial: .seconds(30), maximum: .seconds(30), jitter: 0); $0.resumesSessions = false }
        let bob = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob)
        network.kill(bob)
        try await network.eventually("alice lost bob") { alice.connectedPeers.isEmpty }
        network.disappear(bob)

        let bob2 = try await network.startTransceiver(named: "bob")
        try await network.waitUntilConnected(alice, bob2)
        #expect(network.elapsed == .zero, "no back-off: dialled as soon as it was advertised")
        await network.shutdown()
    }
}
}
