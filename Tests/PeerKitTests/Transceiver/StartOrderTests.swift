import PeerKit
import PeerKitTesting
import Synchronization
import Testing

/// A discovery backend that fails the moment it starts, as Avahi does when avahi-daemon cannot
/// be reached, and counts its starts and stops.
private final class FailingDiscovery: PeerDiscovery {
    private let counts = Mutex((starts: 0, stops: 0))

    var starts: Int { counts.withLock { $0.starts } }
    var stops: Int { counts.withLock { $0.stops } }

    func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        counts.withLock { $0.starts += 1 }
        onEvent(.failed(.discoveryUnavailable(serviceType: request.serviceType, reason: "no daemon in this test")))
    }

    func stop() {
        counts.withLock { $0.stops += 1 }
    }
}

@Suite("What a transceiver says when it starts")
struct StartOrderTests {
    @Test("started comes before any discovery event, even a failure reported the moment discovery starts")
    func startedFirst() async throws {
        let network = TestNetwork()
        let discovery = FailingDiscovery()
        var configuration = network.configuration(named: "alice")
        configuration.discovery = .custom { discovery }
        let alice = PeerTransceiver(configuration: configuration)
        let events = alice.events()
        try await alice.start()
        #expect(discovery.starts == 1, "start() returns with discovery started")
        var iterator = events.makeAsyncIterator()
        let first = await iterator.next()
        let second = await iterator.next()
        guard case .started = first else {
            Issue.record("the first event was \(String(describing: first)), not started")
            return
        }
        guard case let .error(error) = second else {
            Issue.record("the second event was \(String(describing: second)), not the discovery failure")
            return
        }
        #expect(error.code == .discoveryUnavailable)
        alice.stop()
        #expect(discovery.stops == 1)
        await network.shutdown()
    }
}
