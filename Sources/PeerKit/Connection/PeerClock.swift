import NIOCore
import Synchronization

/// The clock every PeerKit timer reads: ``PeerConfiguration/clock``, seen as offsets from the
/// moment the transceiver was made.
///
/// With the default `ContinuousClock` the timers are the event loops' own (`scheduleTask`; a
/// repeating one falls on a grid that all processes share, see ``repeating(on:every:_:)``) and
/// "now" is the loop's `now`, so real time costs nothing extra: no `Task` per timer. With any
/// other clock (a test's manual clock) a timer is a `Task` that sleeps on that clock until an
/// absolute deadline and then runs its body on the event loop, and "now" is the clock's reading,
/// so advancing the clock fires exactly the timers that are due. A deadline is fixed when the
/// timer is made, so a timer whose task starts late (after the clock already passed its
/// deadline) fires at once rather than late.
///
/// Every timer of a non-real clock is kept in a table with its deadline until its body has run
/// on the event loop (or it is cancelled): ``hasDueTimers`` says whether one is due and has not
/// run yet. A test network waits for none before it calls itself settled, so a timer whose task
/// was slow to start, or was woken and has not yet run, still counts as work in flight.
struct PeerClock: Sendable {
    /// Whether this is the real clock (`ContinuousClock`), whose timers are event-loop timers.
    let isReal: Bool
    private let offsetNow: @Sendable () -> Duration
    private let sleepUntilOffset: @Sendable (Duration) async throws -> Void
    /// The timers of a non-real clock that have not run yet.
    private let timers: TimerTable

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
        self.timers = TimerTable()
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

    /// The time `delay` from now, as ``now(on:)`` counts it on `eventLoop`.
    func deadline(in delay: Duration, on eventLoop: any EventLoop) -> NIODeadline {
        isReal ? eventLoop.now + delay.timeAmount : deadline(atOffset: offsetNow() + delay)
    }

    /// The clock's current reading, as an offset from when this clock was made.
    var offset: Duration { offsetNow() }

    /// The NIO deadline of a clock offset (for a non-real clock).
    func deadline(atOffset offset: Duration) -> NIODeadline {
        let (nanoseconds, overflow) = Self.base.addingReportingOverflow(offset.nanosecondsClamped)
        return .uptimeNanoseconds(overflow ? .max : UInt64(max(0, nanoseconds)))
    }

    /// Whether a timer of this (non-real) clock is due and has not run yet. Always false for the
    /// real clock.
    var hasDueTimers: Bool {
        !isReal && timers.hasDue(atOrBefore: offsetNow())
    }

    /// How long until the earliest timer of this (non-real) clock that has not run yet is due
    /// (zero when one is due already); nil when there is none, and always for the real clock.
    var timeUntilNextTimer: Duration? {
        guard !isReal, let earliest = timers.earliestDue else { return nil }
        return max(.zero, earliest - offsetNow())
    }

    /// A sleep until the clock reads `offset`, counted as a timer from now until it ends: a
    /// deadline fixed before the task that sleeps has started. The sleep must be awaited (once).
    func sleep(untilOffset offset: Duration) -> Sleep {
        Sleep(clock: self, offset: offset, id: isReal ? nil : timers.add(due: offset))
    }

    /// A sleep made by ``sleep(untilOffset:)``.
    struct Sleep: Sendable {
        fileprivate let clock: PeerClock
        fileprivate let offset: Duration
        fileprivate let id: UInt64?

        /// Suspends until the clock reads the offset (at once when it already does).
        func wait() async throws {
            defer { id.map(clock.timers.remove) }
            try await clock.sleepUntilOffset(offset)
        }
    }

    /// Runs `body` on `eventLoop` after `delay` on this clock, unless cancelled first.
    func schedule(on eventLoop: any EventLoop, in delay: Duration, _ body: @escaping @Sendable () -> Void) -> PeerTimer {
        if isReal {
            return PeerTimer(scheduled: eventLoop.scheduleTask(in: delay.timeAmount, body))
        }
        return schedule(on: eventLoop, atOffset: offsetNow() + delay, body)
    }

    /// Runs `body` on `eventLoop` at `deadline` (a time as ``now(on:)`` gives it), unless
    /// cancelled first.
    func schedule(on eventLoop: any EventLoop, at deadline: NIODeadline, _ body: @escaping @Sendable () -> Void) -> PeerTimer {
        if isReal {
            return PeerTimer(scheduled: eventLoop.scheduleTask(deadline: deadline, body))
        }
        let nanoseconds = deadline.uptimeNanoseconds >= UInt64(Int64.max) ? Int64.max : Int64(deadline.uptimeNanoseconds)
        return schedule(on: eventLoop, atOffset: .nanoseconds(nanoseconds - Self.base), body)
    }

    private func schedule(on eventLoop: any EventLoop, atOffset deadline: Duration, _ body: @escaping @Sendable () -> Void) -> PeerTimer {
        let cancelled = PeerTimer.Flag()
        let sleep = sleepUntilOffset
        let timers = timers
        let id = timers.add(due: deadline)
        let task = Task {
            do { try await sleep(deadline) } catch {
                timers.remove(id)
                return
            }
            eventLoop.execute {
                // Cancelled after the sleep ended but before this ran: do nothing, as a cancelled
                // event-loop timer would.
                if !cancelled.isSet { body() }
                timers.remove(id)
            }
        }
        return PeerTimer(task: task, flag: cancelled) { timers.remove(id) }
    }

    /// Calls `tick` on `eventLoop` every `interval`, with the time the tick was due, until the
    /// returned timer is cancelled. Ticks of a non-real clock are due at whole multiples of
    /// `interval` from now, so a clock advanced by ten intervals delivers ten ticks, each with its
    /// own time, however late their task runs.
    ///
    /// Ticks of the real clock fall on whole multiples of `interval` of the machine's monotonic
    /// clock (NIO's uptime), which every process on the machine shares: all timers of one interval
    /// tick together, in every event loop and every process, so their work wakes the machine once
    /// rather than at as many scattered moments. (NIO's repeated task counts each delay from the
    /// end of the last run, so its ticks drift apart.) A tick that runs more than an interval late
    /// skips the grid points it missed, as a repeated task would not come sooner either.
    func repeating(on eventLoop: any EventLoop, every interval: Duration, _ tick: @escaping @Sendable (NIODeadline) -> Void) -> PeerTimer {
        if isReal {
            let grid = PeerTimer.Grid()
            Self.tickOnGrid(grid, on: eventLoop, every: UInt64(max(1, interval.nanosecondsClamped)), tick)
            return PeerTimer(grid: grid)
        }
        let start = offsetNow()
        let cancelled = PeerTimer.Flag()
        let clock = self
        let timers = timers
        // The table holds the next tick not yet run: it moves on once a tick has run.
        let id = timers.add(due: start + interval)
        let task = Task {
            var due = start + interval
            while !Task.isCancelled {
                do { try await clock.sleepUntilOffset(due) } catch { break }
                let at = clock.deadline(atOffset: due)
                let next = due + interval
                eventLoop.execute {
                    if !cancelled.isSet { tick(at) }
                    timers.update(id, due: next)
                }
                due = next
            }
            timers.remove(id)
        }
        return PeerTimer(task: task, flag: cancelled) { timers.remove(id) }
    }
}

extension PeerClock {
    /// Schedules the next tick of `grid` at the first multiple of `interval` nanoseconds of
    /// uptime after now; that tick schedules the one after it.
    fileprivate static func tickOnGrid(_ grid: PeerTimer.Grid, on eventLoop: any EventLoop, every interval: UInt64, _ tick: @escaping @Sendable (NIODeadline) -> Void) {
        let now = eventLoop.now.uptimeNanoseconds
        let next = (now / interval + 1) * interval
        let scheduled = eventLoop.scheduleTask(deadline: .uptimeNanoseconds(next)) {
            guard !grid.isCancelled else { return }
            tick(eventLoop.now)
            tickOnGrid(grid, on: eventLoop, every: interval, tick)
        }
        grid.replace(scheduled)
    }
}

/// The timers of a non-real ``PeerClock`` that have not run yet, each with its deadline.
final class TimerTable: Sendable {
    private struct Table {
        var nextID: UInt64 = 0
        var due: [UInt64: Duration] = [:]
    }

    private let table = Mutex(Table())

    /// Adds a timer due at `due`; returns its id.
    func add(due: Duration) -> UInt64 {
        table.withLock { table in
            table.nextID += 1
            table.due[table.nextID] = due
            return table.nextID
        }
    }

    /// Moves a timer still in the table to `due` (a removed one stays removed).
    func update(_ id: UInt64, due: Duration) {
        table.withLock { table in
            if table.due[id] != nil { table.due[id] = due }
        }
    }

    func remove(_ id: UInt64) {
        table.withLock { _ = $0.due.removeValue(forKey: id) }
    }

    /// The deadline of the earliest timer in the table.
    var earliestDue: Duration? {
        table.withLock { $0.due.values.min() }
    }

    /// Whether a timer is due at `now` (or before).
    func hasDue(atOrBefore now: Duration) -> Bool {
        table.withLock { $0.due.values.contains { $0 <= now } }
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

    /// A real clock's repeating timer (``PeerClock/repeating(on:every:_:)``): its next tick's
    /// scheduled task, replaced at every tick.
    final class Grid: Sendable {
        private let state = Mutex<(next: Scheduled<Void>?, cancelled: Bool)>((nil, false))

        var isCancelled: Bool { state.withLock { $0.cancelled } }

        /// Keeps `next` as the task to cancel; cancels it at once when the timer was cancelled
        /// meanwhile (from another thread, while the tick before it ran).
        func replace(_ next: Scheduled<Void>) {
            let cancelled = state.withLock { state -> Bool in
                if !state.cancelled { state.next = next }
                return state.cancelled
            }
            if cancelled { next.cancel() }
        }

        func cancel() {
            let next = state.withLock { state -> Scheduled<Void>? in
                state.cancelled = true
                defer { state.next = nil }
                return state.next
            }
            next?.cancel()
        }
    }

    private enum Kind: Sendable {
        case scheduled(Scheduled<Void>)
        case grid(Grid)
        case task(Task<Void, Never>, Flag, removeFromTable: @Sendable () -> Void)
    }

    private let kind: Kind

    init(scheduled: Scheduled<Void>) { kind = .scheduled(scheduled) }
    init(grid: Grid) { kind = .grid(grid) }
    init(task: Task<Void, Never>, flag: Flag, removeFromTable: @escaping @Sendable () -> Void) {
        kind = .task(task, flag, removeFromTable: removeFromTable)
    }

    /// Stops the timer; a body already running finishes.
    func cancel() {
        switch kind {
        case let .scheduled(scheduled): scheduled.cancel()
        case let .grid(grid): grid.cancel()
        case let .task(task, flag, removeFromTable):
            flag.set()
            task.cancel()
            removeFromTable()
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

extension NIODeadline {
    /// The first time at or after this one that is a whole number of `step`s after `origin`
    /// (`origin` itself when this is earlier): the grid ticks and heartbeat beats of
    /// ``HeartbeatTicker`` and ``ConnectionStateMachine``.
    func roundedUp(toMultipleOf step: TimeAmount, from origin: NIODeadline = .uptimeNanoseconds(0)) -> NIODeadline {
        let time = uptimeNanoseconds, start = origin.uptimeNanoseconds
        guard time > start else { return origin }
        let step = UInt64(max(1, step.nanoseconds))
        let (steps, remainder) = (time - start).quotientAndRemainder(dividingBy: step)
        let (offset, overflow) = (steps + (remainder == 0 ? 0 : 1)).multipliedReportingOverflow(by: step)
        let (rounded, overflow2) = start.addingReportingOverflow(offset)
        return overflow || overflow2 ? .distantFuture : .uptimeNanoseconds(rounded)
    }
}
