import NIOCore
import Synchronization

/// The clock every PeerKit timer reads: ``PeerConfiguration/clock``, seen as offsets from the
/// moment the transceiver was made.
///
/// With the default `ContinuousClock` the timers are the event loops' own (`scheduleTask`,
/// `scheduleRepeatedTask`) and "now" is the loop's `now`, so real time costs nothing extra: no
/// `Task` per timer. With any other clock (a test's `TestClock`) a timer is a `Task` that sleeps
/// on that clock until an absolute deadline and then runs its body on the event loop, and "now"
/// is the clock's reading, so advancing the clock fires exactly the timers that are due. A
/// deadline is fixed when the timer is made, so a timer whose task starts late (after the clock
/// already passed its deadline) fires at once rather than late.
///
/// A timer task that has not yet begun to sleep is counted (``startingTimers``), so that a test
/// network can wait for every timer to be registered with the clock before it moves the clock:
/// otherwise a timer whose task starts while the clock is advanced could miss its deadline.
struct PeerClock: Sendable {
    /// Whether this is the real clock (`ContinuousClock`), whose timers are event-loop timers.
    let isReal: Bool
    private let offsetNow: @Sendable () -> Duration
    private let sleepUntilOffset: @Sendable (Duration) async throws -> Void
    /// Timer tasks of a non-real clock made and not yet sleeping on it.
    private let starting: StartingTimers

    /// Timer tasks of a non-real clock that have been made and are not yet sleeping on it (0 for
    /// the real clock, whose timers are the event loops').
    var startingTimers: Int { starting.count }

    /// The real clock.
    static let continuous = PeerClock(ContinuousClock())

    /// Wraps `clock`; its current reading becomes offset zero.
    init(_ clock: any Clock<Duration>) {
        self = Self.make(clock)
    }

    private init(isReal: Bool, now: @escaping @Sendable () -> Duration, sleep: @escaping @Sendable (Duration) async throws -> Void) {
        self.isReal = isReal
        self.offsetNow = now
        self.sleepUntilOffset = sleep
        self.starting = StartingTimers()
    }

    private static func make<C: Clock<Duration>>(_ clock: C) -> PeerClock {
        let epoch = clock.now
        return PeerClock(
            isReal: C.self == ContinuousClock.self,
            now: { epoch.duration(to: clock.now) },
            sleep: { offset in
                // Due already: no sleep. (A test clock would otherwise hold a sleep until exactly
                // "now" until the clock is next advanced.)
                guard epoch.duration(to: clock.now) < offset else { return }
                try await clock.sleep(until: epoch.advanced(by: offset), tolerance: nil)
            }
        )
    }

    /// NIO deadlines for a non-real clock start here, so that `deadline - interval` never
    /// underflows the unsigned uptime NIO keeps.
    private static let base: Int64 = 1_000_000_000_000

    /// The current time as the connection state machines count it, on `eventLoop`.
    func now(on eventLoop: any EventLoop) -> NIODeadline {
        isReal ? eventLoop.now : deadline(atOffset: offsetNow())
    }

    /// The clock's current reading, as an offset from when this clock was made.
    var offset: Duration { offsetNow() }

    /// The NIO deadline of a clock offset (for a non-real clock).
    func deadline(atOffset offset: Duration) -> NIODeadline {
        let (nanoseconds, overflow) = Self.base.addingReportingOverflow(offset.nanosecondsClamped)
        return .uptimeNanoseconds(overflow ? .max : UInt64(max(0, nanoseconds)))
    }

    /// Suspends until the clock reads `offset` (at once when it already does).
    func sleep(untilOffset offset: Duration) async throws {
        try await sleepUntilOffset(offset)
    }

    /// Runs `body` on `eventLoop` after `delay` on this clock, unless cancelled first.
    func schedule(on eventLoop: any EventLoop, in delay: Duration, _ body: @escaping @Sendable () -> Void) -> PeerTimer {
        if isReal {
            return PeerTimer(scheduled: eventLoop.scheduleTask(in: delay.timeAmount, body))
        }
        let deadline = offsetNow() + delay
        let cancelled = PeerTimer.Flag()
        let sleep = sleepUntilOffset
        let registering = starting.begin()
        let task = Task {
            registering.end()
            do { try await sleep(deadline) } catch { return }
            eventLoop.execute {
                // Cancelled after the sleep ended but before this ran: do nothing, as a cancelled
                // event-loop timer would.
                if !cancelled.isSet { body() }
            }
        }
        return PeerTimer(task: task, flag: cancelled)
    }

    /// Calls `tick` on `eventLoop` every `interval`, with the time the tick was due, until the
    /// returned timer is cancelled. Ticks of a non-real clock are due at whole multiples of
    /// `interval` from now, so a clock advanced by ten intervals delivers ten ticks, each with its
    /// own time, however late their task runs.
    func repeating(on eventLoop: any EventLoop, every interval: Duration, _ tick: @escaping @Sendable (NIODeadline) -> Void) -> PeerTimer {
        if isReal {
            let task = eventLoop.scheduleRepeatedTask(initialDelay: interval.timeAmount, delay: interval.timeAmount) { _ in
                tick(eventLoop.now)
            }
            return PeerTimer(repeated: task)
        }
        let start = offsetNow()
        let cancelled = PeerTimer.Flag()
        let clock = self
        let registering = starting.begin()
        let task = Task {
            registering.end()
            var due = start + interval
            while !Task.isCancelled {
                do { try await clock.sleep(untilOffset: due) } catch { return }
                let at = clock.deadline(atOffset: due)
                eventLoop.execute {
                    if !cancelled.isSet { tick(at) }
                }
                due += interval
            }
        }
        return PeerTimer(task: task, flag: cancelled)
    }
}

/// Counts the timer tasks of a ``PeerClock`` that have not yet begun to sleep.
final class StartingTimers: Sendable {
    private let value = Atomic<Int>(0)

    var count: Int { value.load(ordering: .acquiring) }

    /// Counts a timer task about to be made; its task calls ``Start/end()`` before it sleeps.
    func begin() -> Start {
        value.add(1, ordering: .acquiringAndReleasing)
        return Start(timers: self)
    }

    /// One counted timer task.
    struct Start: Sendable {
        let timers: StartingTimers
        func end() { timers.value.subtract(1, ordering: .acquiringAndReleasing) }
    }
}

/// A timer made by ``PeerClock``; ``cancel()`` stops it if it has not fired.
struct PeerTimer: Sendable {
    /// Set once the timer is cancelled, checked on the event loop before the body runs.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }

    private enum Kind: Sendable {
        case scheduled(Scheduled<Void>)
        case repeated(RepeatedTask)
        case task(Task<Void, Never>, Flag)
    }

    private let kind: Kind

    init(scheduled: Scheduled<Void>) { kind = .scheduled(scheduled) }
    init(repeated: RepeatedTask) { kind = .repeated(repeated) }
    init(task: Task<Void, Never>, flag: Flag) { kind = .task(task, flag) }

    /// Stops the timer; a body already running finishes.
    func cancel() {
        switch kind {
        case let .scheduled(scheduled): scheduled.cancel()
        case let .repeated(repeated): repeated.cancel()
        case let .task(task, flag):
            flag.set()
            task.cancel()
        }
    }
}

extension Duration {
    /// The duration in whole nanoseconds, clamped to `Int64`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = product.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return sum
    }
}
