import NIOConcurrencyHelpers
import NIOCore

/// Ticks the heartbeats of all of a transceiver's connections with one timer per event loop,
/// instead of one per connection, and wakes a loop only at the ticks where one of its
/// connections has something due.
///
/// A timer per connection costs a scheduled task (and its promise) per connection per tick:
/// with 63 connections per process ticking every 0.25 s, that was most of what an idle 64-peer
/// mesh of debug builds spent (about 1.4 cores on a 2-core machine). One timer per loop costs
/// the same for one connection as for a thousand.
///
/// The ticks fall on a grid: whole multiples of ``interval`` on the machine's monotonic clock
/// (NIO's uptime) for the real clock, which every process on the machine shares, so that the
/// loops of all its PeerKit processes wake together; multiples of it from when the loop's first
/// connection registered for a test clock. Each connection's tick says when it next has
/// something due (``ConnectionStateMachine/nextHeartbeat(now:)``), and the loop's timer is set for
/// the first grid tick at or after the earliest of those: an idle link, whose pings the
/// heartbeat's driver sends on a shared beat, wakes its loop about once an interval rather than
/// at every tick. What a connection decides from time alone (its pings, its timeout, its
/// handshake's deadline) is decided on the same grid tick as when every tick looked at every
/// connection; what its handler passes in (its outbox, whether reading is paused) is looked at on
/// every beat at least, and every tick while a limit's grace period runs.
final class HeartbeatTicker: Sendable {
    /// A connection's heartbeat: called with the time of the tick (the loop's `now` for the real
    /// clock, the tick's own time for a test clock) and how much later than its grid time the
    /// tick ran; returns when the connection next needs a tick (nil: not until it asks again).
    typealias Tick = (_ now: NIODeadline, _ lateBy: TimeAmount) -> NIODeadline?

    /// A connection's place in its loop's round; ``cancel()`` it on that loop when the connection ends.
    struct Registration {
        fileprivate let loop: NIOLoopBound<LoopRound>
        fileprivate let id: Int

        /// Stops ticking this connection. Call on its event loop.
        func cancel() {
            loop.value.remove(id)
        }

        /// Says when the connection next needs a tick, when that changed between ticks (a
        /// handshake completed). Call on its event loop.
        func due(_ deadline: NIODeadline?) {
            loop.value.setDue(deadline, of: id)
        }
    }

    let interval: TimeAmount
    let clock: PeerClock
    private let rounds = NIOLockedValueBox<[ObjectIdentifier: NIOLoopBound<LoopRound>]>([:])

    init(interval: TimeAmount, clock: PeerClock = .continuous) {
        self.interval = interval
        self.clock = clock
    }

    /// Calls `tick` on `eventLoop` at the next grid tick, and after that at the grid tick at or
    /// after the time each call returns, until the registration is cancelled. Call on `eventLoop`.
    func register(on eventLoop: any EventLoop, _ tick: @escaping Tick) -> Registration {
        eventLoop.preconditionInEventLoop()
        let round = rounds.withLockedValue { rounds in
            if let round = rounds[ObjectIdentifier(eventLoop)] { return round }
            let round = NIOLoopBound(LoopRound(eventLoop: eventLoop, interval: interval, clock: clock), eventLoop: eventLoop)
            rounds[ObjectIdentifier(eventLoop)] = round
            return round
        }
        return Registration(loop: round, id: round.value.add(tick))
    }
}

/// The connections of one event loop and its timer; used only on that loop.
final class LoopRound {
    /// A registered connection and when it next needs a tick.
    private final class Member {
        let tick: HeartbeatTicker.Tick
        var due: NIODeadline?

        init(tick: @escaping HeartbeatTicker.Tick, due: NIODeadline?) {
            self.tick = tick
            self.due = due
        }
    }

    private let eventLoop: any EventLoop
    private let interval: TimeAmount
    private let clock: PeerClock
    /// Where the grid starts: uptime zero for the real clock, the time the round was made for a
    /// test clock (whose ticks count from there, as a test expects).
    private let origin: NIODeadline
    private var members: [Int: Member] = [:]
    private var nextID = 0
    private var timer: PeerTimer?
    /// The grid tick ``timer`` is set for.
    private var wake: NIODeadline?

    init(eventLoop: any EventLoop, interval: TimeAmount, clock: PeerClock) {
        self.eventLoop = eventLoop
        self.interval = interval
        self.clock = clock
        self.origin = clock.isReal ? .uptimeNanoseconds(0) : clock.now(on: eventLoop)
    }

    func add(_ tick: @escaping HeartbeatTicker.Tick) -> Int {
        nextID += 1
        let now = clock.now(on: eventLoop)
        members[nextID] = Member(tick: tick, due: now)
        schedule(now: now)
        return nextID
    }

    func remove(_ id: Int) {
        members[id] = nil
        if members.isEmpty {
            // An idle loop has no timer at all.
            timer?.cancel()
            timer = nil
            wake = nil
        }
    }

    func setDue(_ due: NIODeadline?, of id: Int) {
        guard let member = members[id] else { return }
        member.due = due
        schedule(now: clock.now(on: eventLoop))
    }

    /// Sets the timer for the grid tick at or after the earliest due member, and strictly after
    /// `now` (a tick that is due already runs at the next grid tick, as it did when every tick
    /// ran); cancels it when none is due.
    private func schedule(now: NIODeadline) {
        var earliest: NIODeadline?
        for member in members.values {
            guard let due = member.due else { continue }
            if earliest.map({ due < $0 }) ?? true { earliest = due }
        }
        guard let earliest else {
            timer?.cancel()
            timer = nil
            wake = nil
            return
        }
        let next = max(earliest, now + .nanoseconds(1)).roundedUp(toMultipleOf: interval, from: origin)
        guard next != wake else { return }
        timer?.cancel()
        wake = next
        let round = NIOLoopBound(self, eventLoop: eventLoop)
        timer = clock.schedule(on: eventLoop, at: next) {
            round.value.fire(at: next)
        }
    }

    /// Ticks every member due by now, then sets the timer again.
    private func fire(at scheduled: NIODeadline) {
        guard wake == scheduled else { return }
        timer = nil
        wake = nil
        // The real clock's tick runs at the loop's now, which says how late it is; a test
        // clock's runs at its own time, however late its task ran.
        let now = clock.isReal ? eventLoop.now : scheduled
        let lateBy = now - scheduled
        // A tick may end its connection, which removes it: iterate over the members as they
        // were, a copy-on-write value that is copied only when a tick does remove one.
        let members = self.members
        for member in members.values {
            guard let due = member.due, due <= now else { continue }
            member.due = member.tick(now, lateBy)
        }
        if !self.members.isEmpty { schedule(now: now) }
    }
}
