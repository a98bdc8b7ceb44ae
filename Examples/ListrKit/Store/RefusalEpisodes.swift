/// Which refusals listrd logs: the first of each source's episode, then one summary with a count.
///
/// A peer can send requests that are refused (a wrong position, a full list, too many watchers)
/// as fast as the network carries them; one notice line each made 147,075 lines (30 MB) in 15 s
/// from one peer. Instead, the refusals of one key form an episode that lasts until it goes
/// ``quietPeriod`` without one (``defaultQuietPeriod``, 10 s, unless listrd's
/// `--refusal-quiet-period` says otherwise): the first refusal of an episode is logged (at
/// notice, with its reason), the others are counted, and the count is logged as one line when
/// the episode ends, and every ``summaryInterval`` while it goes on: `refused 147075 more
/// requests from … in the last 15 s`. So a key costs the log at most two lines per
/// ``summaryInterval``, whatever it sends.
/// listrd keys episodes by the peer's source address (``PeerTransceiver/sourceAddress(of:)``), not
/// its peer ID, which costs nothing to make up.
///
/// At most ``maximumEpisodes`` keys are followed at once (an entry is a few dozen bytes); the
/// refusals of further keys are counted together, as those of "other peers", in one more episode. A value type with no clock and no I/O: the caller passes
/// the time and logs the lines it returns.
public struct RefusalEpisodes: Sendable {
    /// How long a peer goes without a refusal before its episode ends, by default: 10 s.
    public static let defaultQuietPeriod: Duration = .seconds(10)
    /// How often an episode that goes on is summarised: every 60 s.
    public static let summaryInterval: Duration = .seconds(60)
    /// How many peers' episodes are followed one by one: 1,024; beyond, they share one.
    public static let maximumEpisodes = 1024
    /// The key, and name, of the episode shared by peers beyond ``maximumEpisodes``.
    public static let otherPeers = "other peers"

    /// What to log about one refusal.
    public struct Lines: Equatable, Sendable {
        /// Whether to log the refusal itself (it starts an episode).
        public var logRefusal: Bool
        /// A summary of the peer's previous episode, which ended unsummarised, to log first.
        public var summary: String?
    }

    private struct Episode {
        var name: String
        var last: ContinuousClock.Instant
        var since: ContinuousClock.Instant
        var unlogged: Int
    }

    private var episodes: [String: Episode] = [:]

    /// How long a peer goes without a refusal before its episode ends.
    public let quietPeriod: Duration

    /// No episode yet; an episode ends after `quietPeriod` without a refusal.
    public init(quietPeriod: Duration = Self.defaultQuietPeriod) {
        self.quietPeriod = quietPeriod
    }

    /// How many episodes are followed.
    public var count: Int { episodes.count }

    /// Counts a refusal of a request from the peer `key` (named `name` in the log) at `now`.
    public mutating func refused(key: String, name: String, at now: ContinuousClock.Instant) -> Lines {
        var key = key
        var name = name
        if episodes[key] == nil, episodes.count >= Self.maximumEpisodes - 1, key != Self.otherPeers {
            key = Self.otherPeers
            name = Self.otherPeers
        }
        guard var episode = episodes[key] else {
            episodes[key] = Episode(name: name, last: now, since: now, unlogged: 0)
            return Lines(logRefusal: true, summary: nil)
        }
        if now - episode.last >= quietPeriod {
            let summary = Self.summary(of: episode, until: episode.last)
            episodes[key] = Episode(name: name, last: now, since: now, unlogged: 0)
            return Lines(logRefusal: true, summary: summary)
        }
        episode.unlogged += 1
        episode.last = now
        episodes[key] = episode
        return Lines(logRefusal: false, summary: nil)
    }

    /// The summaries due at `now`: of episodes that ended (``quietPeriod`` without a refusal),
    /// which are forgotten, and of those going on for ``summaryInterval`` since their last line.
    public mutating func due(at now: ContinuousClock.Instant) -> [String] {
        var lines: [String] = []
        for (key, var episode) in episodes {
            if now - episode.last >= quietPeriod {
                episodes[key] = nil
                if let line = Self.summary(of: episode, until: episode.last) { lines.append(line) }
            } else if now - episode.since >= Self.summaryInterval {
                if let line = Self.summary(of: episode, until: now) { lines.append(line) }
                episode.unlogged = 0
                episode.since = now
                episodes[key] = episode
            }
        }
        return lines.sorted()
    }

    private static func summary(of episode: Episode, until end: ContinuousClock.Instant) -> String? {
        guard episode.unlogged > 0 else { return nil }
        let seconds = max(1, Int(((end - episode.since) / .seconds(1)).rounded(.up)))
        let requests = episode.unlogged == 1 ? "request" : "requests"
        return "refused \(episode.unlogged) more \(requests) from \(episode.name) in the last \(seconds) s (only the first refusal of a series is logged)"
    }
}
