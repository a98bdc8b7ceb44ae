import Testing
@testable import PeerKit

@Suite("The event stream")
struct PeerEventStreamTests {
    /// Every event of `stream` until it finishes, failing after `seconds`.
    private func collect(_ stream: AsyncStream<PeerEvent>, within seconds: Double = 20) async throws -> [PeerEvent] {
        try await within(seconds, "the event stream to finish") {
            var events: [PeerEvent] = []
            for await event in stream { events.append(event) }
            return events
        }
    }

    @Test("a subscription made after start does not replay started, and finishes after stopped")
    func noReplayAndFinishOnStop() async throws {
        let transceiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "solo"))
        try await transceiver.start()
        let late = transceiver.events()
        transceiver.stop()
        let events = try await collect(late)
        #expect(events == [.stopped])
    }

    @Test("a subscription made before start sees started, then stopped, and then finishes")
    func fullRun() async throws {
        let transceiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "solo"))
        let early = transceiver.events()
        try await transceiver.start()
        let port = try #require(transceiver.listeningPort)
        await transceiver.shutdown()
        let events = try await collect(early)
        #expect(events == [.started(port: port), .stopped])
    }

    @Test("after a restart a new subscription sees the new run from started to stopped")
    func restart() async throws {
        let transceiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "solo"))
        let first = transceiver.events()
        try await transceiver.start()
        transceiver.stop()
        _ = try await collect(first)
        let second = transceiver.events()
        try await transceiver.start()
        transceiver.stop()
        let events = try await collect(second)
        #expect(events.first.map { if case .started = $0 { true } else { false } } == true)
        #expect(events.last == .stopped)
    }
}
