import Synchronization

/// The ``RefusalEpisodes`` of one listrd, shared by its handlers: says which refusal lines to log.
///
/// It only counts and returns lines; the caller logs them (no logging under its lock). `now` is
/// the clock, injected so that tests move time instead of sleeping.
public final class RefusalLog: Sendable {
    private let episodes: Mutex<RefusalEpisodes>
    private let now: @Sendable () -> ContinuousClock.Instant

    /// A log of refusals timed by `now` (the continuous clock by default), whose episodes end
    /// after `quietPeriod` without a refusal.
    public init(
        quietPeriod: Duration = RefusalEpisodes.defaultQuietPeriod,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.episodes = Mutex(RefusalEpisodes(quietPeriod: quietPeriod))
        self.now = now
    }

    /// Counts a refusal of a request from the peer `key`, named `name`; returns what to log (see
    /// ``RefusalEpisodes/refused(key:name:at:)``).
    public func refused(key: String, name: String) -> RefusalEpisodes.Lines {
        let now = now()
        return episodes.withLock { $0.refused(key: key, name: name, at: now) }
    }

    /// The summary lines due now (see ``RefusalEpisodes/due(at:)``); listrd asks every second.
    public func due() -> [String] {
        let now = now()
        return episodes.withLock { $0.due(at: now) }
    }
}
