import Clocks
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@testable import PeerKit

/// `PeerConfiguration.clock` takes any `Clock<Duration>`: PeerKit's timers on swift-clocks'
/// `TestClock`, with no test network, fire when the clock passes their deadlines and not before.
/// Last, the real clock's repeating timer on an `EmbeddedEventLoop`, whose time the test sets.
@Suite("PeerClock on swift-clocks' TestClock, and the real clock's grid")
struct PeerClockTests {
    let eventLoop = MultiThreadedEventLoopGroup.singleton.next()

    /// Waits until no timer of `clock` is due and not yet run on the event loop.
    private func waitForDueTimers(_ clock: PeerClock) async throws {
        try await clock.runDueTimers(on: eventLoop)
        #expect(!clock.hasDueTimers)
    }

    @Test("a timer fires on the event loop once the clock reaches its deadline, and not before")
    func timerFiresAtDeadline() async throws {
        let testClock = TestClock()
        let clock = PeerClock(testClock)
        let fired = NIOLockedValueBox(0)
        _ = clock.schedule(on: eventLoop, in: .seconds(1)) { fired.withLockedValue { $0 += 1 } }
        await testClock.advance(by: .milliseconds(999))
        try await waitForDueTimers(clock)
        #expect(fired.withLockedValue { $0 } == 0)
        await testClock.advance(by: .milliseconds(1))
        try await waitForDueTimers(clock)
        #expect(fired.withLockedValue { $0 } == 1)
    }

    @Test("a duration too long for NIO's TimeAmount is clamped, not a crash: a deadline .seconds(.max) away is NIO's distant future")
    func hugeDurations() {
        #expect(Duration.seconds(Int64.max).timeAmount == .nanoseconds(.max))
        #expect(Duration.seconds(Int64.min).timeAmount == .nanoseconds(.min))
        #expect(Duration.milliseconds(1500).timeAmount == .milliseconds(1500))
        #expect(PeerClock.continuous.deadline(in: .seconds(Int64.max), on: eventLoop) == .distantFuture)
    }

    @Test("a cancelled timer never fires")
    func cancelledTimer() async throws {
        let testClock = TestClock()
        let clock = PeerClock(testClock)
        let fired = NIOLockedValueBox(0)
        let timer = clock.schedule(on: eventLoop, in: .seconds(1)) { fired.withLockedValue { $0 += 1 } }
        timer.cancel()
        await testClock.advance(by: .seconds(2))
        try await waitForDueTimers(clock)
        #expect(fired.withLockedValue { $0 } == 0)
    }

    @Test("a repeating timer ticks once per interval passed, each with the time it was due")
    func repeatingTicks() async throws {
        let testClock = TestClock()
        let clock = PeerClock(testClock)
        let ticks = NIOLockedValueBox<[NIODeadline]>([])
        let timer = clock.repeating(on: eventLoop, every: .milliseconds(250)) { at in ticks.withLockedValue { $0.append(at) } }
        await testClock.advance(by: .seconds(1))
        try await waitForDueTimers(clock)
        timer.cancel()
        let expected = [250, 500, 750, 1_000].map { clock.deadline(atOffset: .milliseconds($0)) }
        #expect(ticks.withLockedValue { $0 } == expected)
    }

    @Test("the real clock's repeating ticks fall on whole multiples of the interval, wherever the timer started, so every process ticks together")
    func realTicksOnSharedGrid() throws {
        let eventLoop = EmbeddedEventLoop()
        defer { try? eventLoop.syncShutdownGracefully() }
        let ticks = NIOLockedValueBox<[UInt64]>([])
        // Made 30 ms past a multiple of 250 ms: the first tick comes 220 ms later, not 250 ms.
        eventLoop.advanceTime(to: .uptimeNanoseconds(1_030_000_000))
        let timer = PeerClock.continuous.repeating(on: eventLoop, every: .milliseconds(250)) { now in
            ticks.withLockedValue { $0.append(now.uptimeNanoseconds / 1_000_000) }
        }
        eventLoop.advanceTime(to: .uptimeNanoseconds(2_000_000_000))
        #expect(ticks.withLockedValue { $0 } == [1_250, 1_500, 1_750, 2_000])
        timer.cancel()
        eventLoop.advanceTime(by: .seconds(1))
        #expect(ticks.withLockedValue { $0 }.count == 4)
    }
}

extension PeerClock {
    /// Lets the timers of this (non-real) clock that are due run: yields to the tasks and to
    /// `eventLoop` until none is due and not yet run (or 10,000 rounds passed).
    func runDueTimers(on eventLoop: any EventLoop) async throws {
        for _ in 0..<10_000 where hasDueTimers {
            await Task.yield()
            try await eventLoop.submit {}.get()
        }
    }
}
