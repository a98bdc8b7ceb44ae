import Testing
@testable import PeerKit

/// The hub's runs of closure events: a run's events end with that run, never with another's.
@Suite("The event hub's closure runs", .timeLimit(.minutes(1)))
struct PeerEventHubTests {
    @Test("a stop that detached its run's events finishes them, not those of a run started after it")
    func stopDoesNotEndTheNextRun() async {
        let hub = PeerEventHub()
        let first = hub.beginCallbacks()
        // The stop takes its run's events under the lifecycle lock; a start follows at once,
        // before the stop publishes .stopped.
        let ended = hub.detachCallbacks()
        let second = hub.beginCallbacks()
        hub.publishStopped(callbacks: ended)
        hub.publish(.knownPeersListed)
        hub.endCallbacks()

        var firstEvents: [PeerEvent] = []
        for await event in first { firstEvents.append(event) }
        var secondEvents: [PeerEvent] = []
        for await event in second { secondEvents.append(event) }
        #expect(firstEvents == [.stopped])
        #expect(secondEvents == [.knownPeersListed])
    }

    @Test("events published while no run is current reach no closure run")
    func noRun() async {
        let hub = PeerEventHub()
        let run = hub.beginCallbacks()
        hub.publish(.knownPeersListed)
        let ended = hub.detachCallbacks()
        // Between the end of the run and its .stopped: no run is current, so this reaches none.
        hub.publish(.availablePeersChanged([]))
        hub.publishStopped(callbacks: ended)
        var events: [PeerEvent] = []
        for await event in run { events.append(event) }
        #expect(events == [.knownPeersListed, .stopped])
    }
}
