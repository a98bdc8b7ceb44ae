import ListrKit
import Testing

@Suite("RefusalEpisodes: refusals from one peer are logged once per series, with a count")
struct RefusalEpisodesTests {
    let start = ContinuousClock.now

    @Test("147,075 refusals from one peer in 15 s make two lines: the first refusal, then one count when the series ends")
    func flood() {
        var episodes = RefusalEpisodes()
        var logged = 0
        var lines: [String] = []
        let total = 147_075
        for index in 0..<total {
            let now = start + .microseconds(Int64(index) * 100)  // 14.7 s in all
            let result = episodes.refused(key: "P", name: "the peer P", at: now)
            if result.logRefusal { logged += 1 }
            if let summary = result.summary { lines.append(summary) }
            if index % 10_000 == 0 { lines += episodes.due(at: now) }  // listrd asks every second or so
        }
        #expect(logged == 1)
        #expect(lines.isEmpty, "nothing is summarised while the series goes on for less than a minute")
        let last = start + .microseconds(Int64(total - 1) * 100)
        #expect(episodes.due(at: last + .seconds(9)).isEmpty, "the series has not ended yet")
        let ended = episodes.due(at: last + .seconds(10))
        #expect(ended == ["refused 147074 more requests from the peer P in the last 15 s (only the first refusal of a series is logged)"])
        #expect(episodes.count == 0, "an ended series is forgotten")
    }

    @Test("a series that goes on is summarised every minute, and a new series starts with a logged refusal")
    func longSeries() {
        var episodes = RefusalEpisodes()
        var summaries: [String] = []
        var logged = 0
        for second in 0..<150 {
            let now = start + .seconds(second)
            summaries += episodes.due(at: now)  // listrd asks every second
            for _ in 0..<10 where episodes.refused(key: "P", name: "P", at: now).logRefusal { logged += 1 }
        }
        #expect(logged == 1)
        #expect(summaries == [
            "refused 599 more requests from P in the last 60 s (only the first refusal of a series is logged)",
            "refused 600 more requests from P in the last 60 s (only the first refusal of a series is logged)",
        ])
        // 31 s of quiet: the series ended; the next refusal is logged again, after the count of
        // the series' last 29 s (it was not asked for in between).
        let next = episodes.refused(key: "P", name: "P", at: start + .seconds(180))
        #expect(next.logRefusal)
        #expect(next.summary == "refused 300 more requests from P in the last 29 s (only the first refusal of a series is logged)")
    }

    @Test("a single refusal is logged and needs no count; each peer has its own series")
    func peers() {
        var episodes = RefusalEpisodes()
        #expect(episodes.refused(key: "A", name: "A", at: start).logRefusal)
        #expect(episodes.refused(key: "B", name: "B", at: start).logRefusal)
        #expect(!episodes.refused(key: "A", name: "A", at: start + .seconds(1)).logRefusal)
        #expect(episodes.due(at: start + .seconds(20)) == ["refused 1 more request from A in the last 1 s (only the first refusal of a series is logged)"])
        #expect(episodes.count == 0)
    }

    @Test("a series ends after the quiet period it was given, not the default")
    func quietPeriod() {
        var episodes = RefusalEpisodes(quietPeriod: .seconds(3))
        #expect(episodes.refused(key: "A", name: "A", at: start).logRefusal)
        #expect(!episodes.refused(key: "A", name: "A", at: start + .seconds(2)).logRefusal, "2 s apart: the same series")
        #expect(episodes.due(at: start + .milliseconds(4_900)).isEmpty, "2.9 s of quiet: the series goes on")
        #expect(episodes.due(at: start + .seconds(5)) == ["refused 1 more request from A in the last 2 s (only the first refusal of a series is logged)"])
        #expect(episodes.refused(key: "A", name: "A", at: start + .seconds(5)).logRefusal, "a new series")
        #expect(episodes.refused(key: "A", name: "A", at: start + .seconds(8)).logRefusal, "3 s apart: another series")
    }

    @Test("at most 1,024 series are followed: refusals from further peers share one")
    func manyPeers() {
        var episodes = RefusalEpisodes()
        var logged = 0
        for index in 0..<10_000 where episodes.refused(key: "peer \(index)", name: "peer \(index)", at: start).logRefusal {
            logged += 1
        }
        #expect(episodes.count == RefusalEpisodes.maximumEpisodes)
        #expect(logged == RefusalEpisodes.maximumEpisodes)
        let lines = episodes.due(at: start + .seconds(10))
        #expect(lines == ["refused \(10_000 - RefusalEpisodes.maximumEpisodes) more requests from other peers in the last 1 s (only the first refusal of a series is logged)"])
    }
}
