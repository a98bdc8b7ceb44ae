import NIOConcurrencyHelpers
import NIOCore

/// Ticks the heartbeats of all of a transceiver's connections with one repeated timer per event
/// loop, instead of one per connection.
///
/// A timer per connection costs a scheduled task (and its promise) per connection per tick:
/// with 63 connections per process ticking every 0.25 s, that was most of what an idle 64-peer
/// mesh of debug builds spent (about 1.4 cores on a 2-core machine). One timer per loop costs
/// the same for one connection as for a thousand.
///
/// The timer comes from the transceiver's ``PeerClock``: an event-loop timer for the real clock,
/// one sleeping task per loop for a test clock. Each tick carries the time it was due.
final class HeartbeatTicker: Sendable {
    /// A connection's place in its loop's round; ``cancel()`` it on that loop when the connection ends.
    struct Registration {
        fileprivate let loop: NIOLoopBound<LoopRound>
        fileprivate let id: Int

        /// Stops ticking this connection. Call on its event loop.
        func cancel() {
            loop.value.remove(id)
        }
    }

    let interval: TimeAmount
    let clock: PeerClock
    private let rounds = NIOLockedValueBox<[ObjectIdentifier: NIOLoopBound<LoopRound>]>([:])

    init(interval: TimeAmount, clock: PeerClock = .continuous) {
        self.interval = interval
        self.clock = clock
    }

    /// Calls `tick` every ``interval`` on `eventLoop`, with the time the tick was due, until the
    /// registration is cancelled. Call on `eventLoop`.
    func register(on eventLoop: any EventLoop, _ tick: @escaping (NIODeadline) -> Void) -> Registration {
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
    private let eventLoop: any EventLoop
    private let interval: TimeAmount
    private let clock: PeerClock
    private var members: [Int: (NIODeadline) -> Void] = [:]
    private var nextID = 0
    private var task: PeerTimer?

    init(eventLoop: any EventLoop, interval: TimeAmount, clock: PeerClock) {
        self.eventLoop = eventLoop
        self.interval = interval
        self.clock = clock
    }

    func add(_ tick: @escaping (NIODeadline) -> Void) -> Int {
        nextID += 1
        members[nextID] = tick
        if task == nil {
            let round = NIOLoopBound(self, eventLoop: eventLoop)
            task = clock.repeating(on: eventLoop, every: .nanoseconds(interval.nanoseconds)) { now in
                round.value.tickAll(now: now)
            }
        }
        return nextID
    }

    func remove(_ id: Int) {
        members[id] = nil
        if members.isEmpty {
            // An idle loop has no timer at all.
            task?.cancel()
            task = nil
        }
    }

    private func tickAll(now: NIODeadline) {
        // A tick may end its connection, which removes it: iterate over the members as they
        // were, a copy-on-write value that is copied only when a tick does remove one (an array
        // made of them at every tick was a tenth of an idle mesh's tick).
        let members = self.members
        for tick in members.values { tick(now) }
    }
}
