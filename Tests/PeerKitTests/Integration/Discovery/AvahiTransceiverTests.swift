import Foundation
import PeerKit
import Testing

extension DiscoveryTests {
    /// The whole stack over the real loopback avahi-daemon: transceivers configured with nothing
    /// but a service type find each other through DNS-SD, connect and exchange messages.
    @Suite("Transceivers over Avahi")
    struct AvahiTransceiverTests {
        struct Greeting: Codable, Sendable, Equatable { var text: String }

        @Test func twoTransceiversWithOnlyAServiceTypeFindEachOtherAndTalk() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            // Same default peer name (the host name) for both: the second advertisement is renamed.
            let alpha = PeerTransceiver(serviceType: type)
            let bravo = PeerTransceiver(serviceType: type)
            defer { alpha.stop(); bravo.stop() }
            let (greetings, inbox) = AsyncStream.makeStream(of: Greeting.self)
            bravo.receive(Greeting.self) { greeting in inbox.yield(greeting) }
            try await alpha.start()
            try await bravo.start()

            let seenByAlpha = try await alpha.waitForPeer(timeout: .seconds(20))
            let seenByBravo = try await bravo.waitForPeer(timeout: .seconds(20))
            #expect(seenByAlpha.id == bravo.peerID)
            #expect(seenByBravo.id == alpha.peerID)

            alpha.broadcast(Greeting(text: "hello over mDNS"))
            let received = try await firstValue(of: greetings, within: .seconds(20))
            #expect(received == Greeting(text: "hello over mDNS"))
        }

        @Test func threeTransceiversAllConnect() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let transceivers = (0..<3).map { index in
                var configuration = PeerConfiguration(serviceType: type)
                configuration.peerName = "node\(index)"
                return PeerTransceiver(configuration: configuration)
            }
            defer { transceivers.forEach { $0.stop() } }
            for transceiver in transceivers { try await transceiver.start() }
            for transceiver in transceivers {
                let others = Set(transceivers.map(\.peerID)).subtracting([transceiver.peerID])
                let deadline = ContinuousClock.now + .seconds(20)
                while Set(transceiver.connectedPeers.map(\.id)) != others, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(Set(transceiver.connectedPeers.map(\.id)) == others)
            }
        }

        @Test("a transceiver started after a peer is advertised is told when discovery has listed it")
        func knownPeersAreListedFromTheCache() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            var configuration = PeerConfiguration(serviceType: type)
            configuration.peerName = "store"
            let store = PeerTransceiver(configuration: configuration)
            defer { store.stop() }
            try await store.start()
            // A first browser sees the store once it is announced (after mDNS probing) ...
            let watcher = PeerTransceiver(serviceType: type)
            defer { watcher.stop() }
            try await watcher.start()
            _ = try await watcher.waitForPeer(timeout: .seconds(20)) { $0.id == store.peerID }

            // ... so a new browser finds it in avahi-daemon's cache and says when it has listed it.
            var clientConfiguration = PeerConfiguration(serviceType: type)
            clientConfiguration.advertises = false
            let client = PeerTransceiver(configuration: clientConfiguration)
            defer { client.stop() }
            let events = client.events()
            #expect(!client.knownPeersListed)
            try await client.start()
            _ = try await nextEvent(events, "the known peers listed") { event in
                if case .knownPeersListed = event { return true }
                return false
            }
            #expect(client.knownPeersListed)
            #expect(client.availablePeers.map(\.id).contains(store.peerID))
        }

        @Test func twoProcessesFindEachOtherThroughAvahiAndTalk() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            // No --static: each node advertises and browses through the shared loopback daemon.
            let alpha = try NodeProcess(arguments: [type, "--name", "alpha"])
            defer { alpha.terminate() }
            let bravo = try NodeProcess(arguments: [type, "--name", "bravo"])
            defer { bravo.terminate() }
            _ = try await alpha.next("peerConnected", ["peer.name": "bravo"])
            _ = try await bravo.next("peerConnected", ["peer.name": "alpha"])
            bravo.command("broadcast hello from another process")
            _ = try await alpha.next("message", ["text": "hello from another process", "from.name": "bravo"])
        }

        private func firstValue<Value: Sendable>(of stream: AsyncStream<Value>, within timeout: Duration) async throws -> Value {
            try await withThrowingTaskGroup(of: Value?.self) { group in
                group.addTask { await stream.first { _ in true } }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let value = try await group.next() ?? nil else {
                    throw DiscoveryEventRecorder.TimedOut(awaited: "a message", timeout: timeout, events: [])
                }
                return value
            }
        }
    }
}
