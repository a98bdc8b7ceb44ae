import Synchronization

/// The clock of a ``TestNetwork``: a manual clock that only moves when the network advances it
/// (``TestNetwork/advance(by:step:)``), shared by every timer of every transceiver on the network
/// and by whatever else the test gives it to (it is an ordinary `Clock<Duration>`).
///
/// It is what swift-clocks' `TestClock` is, made for a network that settles itself: moving the
/// clock resumes the sleeps it reached at once, in deadline order, and leaves running them to the
/// network, which waits for quiet after every move. A `TestClock` instead yields to the
/// scheduler some twenty times per sleep it wakes and per move, in the hope that the woken work
/// runs in the meantime; on a network where every heartbeat is a sleep, that is most of a test's
/// time (measured: PeerKit's test-network suites took 2.1 s on a `TestClock`, 0.45 s on this
/// clock). A `TestClock` stays a good `PeerConfiguration.clock` outside a test network.
///
/// A sleep until a deadline the clock has reached returns at once; a sleep whose task is
/// cancelled throws `CancellationError` at once.
public final class NetworkClock: Clock, Sendable {
    /// A reading of a ``NetworkClock``: the time since the clock was made.
    public struct Instant: InstantProtocol, Hashable, Sendable {
        /// The time since the clock was made.
        public var offset: Duration

        /// The reading `offset` after the clock was made.
        public init(offset: Duration) {
            self.offset = offset
        }

        /// This reading moved by `duration`.
        public func advanced(by duration: Duration) -> Instant {
            Instant(offset: offset + duration)
        }

        /// The time from this reading to `other`.
        public func duration(to other: Instant) -> Duration {
            other.offset - offset
        }

        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.offset < rhs.offset
        }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [UInt64: Sleeper] = [:]
        /// Sleeps cancelled before they were registered.
        var cancelled: Set<UInt64> = []
    }

    private let state = Mutex(State())

    /// A clock that reads zero and only moves when its network advances it.
    public init() {}

    /// The clock's current reading.
    public var now: Instant {
        state.withLock { $0.now }
    }

    /// The smallest step the clock can take: any.
    public var minimumResolution: Duration { .zero }

    /// Suspends until the clock reaches `deadline` (returns at once if it has); throws
    /// `CancellationError` if the task is cancelled first. `tolerance` is ignored: the clock
    /// moves only when told to.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case wait, due, cancelled }
                let outcome = state.withLock { state -> Outcome in
                    if state.cancelled.remove(id) != nil { return .cancelled }
                    if deadline <= state.now { return .due }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return .wait
                }
                switch outcome {
                case .wait: break
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            // Runs at most once, either before the sleep is registered (it is then refused when
            // it tries) or after (it is then taken off and ended here).
            let sleeper = state.withLock { state -> Sleeper? in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        // A cancelled sleep that had already ended leaves its mark; clear it.
        _ = state.withLock { $0.cancelled.remove(id) }
    }

    /// Moves the clock forward by `duration` (never back) and resumes, in deadline order, every
    /// sleep it reaches. It does not wait for the woken work: ``TestNetwork`` settles after moving it.
    func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: max(.zero, duration))
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }.sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
            for (id, _) in due { state.sleepers[id] = nil }
            return due.map(\.value)
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// How long until the earliest sleep on the clock ends; nil when nothing sleeps on it.
    var timeUntilNextWake: Duration? {
        state.withLock { state in
            state.sleepers.values.map(\.deadline).min().map { state.now.duration(to: $0) }
        }
    }

    /// The clock's reading as a duration since it was made.
    var elapsed: Duration { now.offset }
}
