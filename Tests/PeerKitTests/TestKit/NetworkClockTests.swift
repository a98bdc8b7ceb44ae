import NIOConcurrencyHelpers
import PeerKitTesting
import Testing

@testable import PeerKitTesting

/// The test network's clock on its own: sleeps end when it reaches them and not before,
/// cancellation ends them at once, and a sleep it has reached does not wait for a move.
@Suite("NetworkClock")
struct NetworkClockTests {
    @Test("a move ends the sleeps it reaches and no others")
    func wakesInDeadlineOrder() async throws {
        let clock = NetworkClock()
        let woken = NIOLockedValueBox<[Int]>([])
        var sleepers: [Task<Void, any Error>] = []
        for milliseconds in [300, 100, 200, 900] {
            sleepers.append(Task.immediate {
                try await clock.sleep(for: .milliseconds(milliseconds))
                woken.withLockedValue { $0.append(milliseconds) }
            })
        }
        #expect(clock.timeUntilNextWake == .milliseconds(100))
        clock.advance(by: .milliseconds(300))
        for sleeper in sleepers.prefix(3) { try await sleeper.value }
        #expect(Set(woken.withLockedValue { $0 }) == [100, 200, 300])
        #expect(clock.timeUntilNextWake == .milliseconds(600), "the 900 ms sleep still sleeps")
        #expect(clock.now == NetworkClock.Instant(offset: .milliseconds(300)))
        sleepers[3].cancel()
        await #expect(throws: CancellationError.self) { try await sleepers[3].value }
        #expect(clock.timeUntilNextWake == nil)
    }

    @Test("a sleep until a time the clock has reached returns without the clock moving")
    func reachedDeadline() async throws {
        let clock = NetworkClock()
        clock.advance(by: .seconds(1))
        try await clock.sleep(until: NetworkClock.Instant(offset: .seconds(1)))
        try await clock.sleep(until: NetworkClock.Instant(offset: .milliseconds(500)))
        #expect(clock.elapsed == .seconds(1))
    }

    @Test("a sleep in a task cancelled before it began throws CancellationError and leaves nothing behind")
    func cancelledFirst() async throws {
        let clock = NetworkClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.timeUntilNextWake == nil)
    }

    @Test("a sleep of the test's own on the network's clock ends when the network advances past it, not before")
    func networkStopsAtOwnSleeps() async throws {
        let network = TestNetwork()
        let woken = NIOLockedValueBox<[Int]>([])
        let sleeper = Task.immediate {
            try await network.clock.sleep(for: .milliseconds(1_500))
            woken.withLockedValue { $0.append(1_500) }
        }
        await network.advance(by: .seconds(1))
        #expect(woken.withLockedValue { $0 }.isEmpty)
        await network.advance(by: .seconds(1))
        try await sleeper.value
        #expect(woken.withLockedValue { $0 } == [1_500])
        #expect(network.elapsed == .seconds(2))
        await network.shutdown()
    }
}
