import Clocks
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import PeerKit

@Suite("Request deadlines (no clock, no sockets)")
struct RequestDeadlinesTests {
    private func at(_ seconds: Int) -> NIODeadline { .uptimeNanoseconds(UInt64(seconds) * 1_000_000_000) }

    @Test("the live requests whose deadlines passed come out earliest first; ended ones are skipped")
    func expiredInOrder() {
        var deadlines = RequestDeadlines()
        let live: Set = ["a", "c", "d"]
        for (id, second) in [("d", 4), ("a", 1), ("b", 2), ("c", 3)] {
            _ = deadlines.add(id, deadline: at(second), liveCount: 4)
        }
        #expect(deadlines.expired(at: at(3)) { live.contains($0) } == ["a", "c"])
        #expect(deadlines.earliest { live.contains($0) } == at(4))
        #expect(deadlines.expired(at: at(10)) { live.contains($0) } == ["d"])
        #expect(deadlines.earliest { live.contains($0) } == nil)
    }

    @Test("the earliest live deadline drops the ended requests ahead of it")
    func earliestSkipsEnded() {
        var deadlines = RequestDeadlines()
        _ = deadlines.add("old", deadline: at(1), liveCount: 1)
        _ = deadlines.add("new", deadline: at(5), liveCount: 2)
        #expect(deadlines.earliest { $0 == "new" } == at(5))
        #expect(deadlines.count == 1)
    }

    @Test("one request never answered while thousands end behind it: the heap stays within twice the live ones plus the slack")
    func boundedWhileTheTopWaits() {
        var deadlines = RequestDeadlines()
        var live: Set = ["stuck"]
        _ = deadlines.add("stuck", deadline: at(1), liveCount: 1)
        var largest = 0
        for n in 0..<10_000 {
            let id = "r\(n)"
            live.insert(id)
            if deadlines.add(id, deadline: at(2 + n), liveCount: live.count) {
                deadlines.rebuild { live.contains($0) }
            }
            largest = max(largest, deadlines.count)
            live.remove(id)  // answered before the next is sent
        }
        #expect(largest <= 2 * 2 + RequestDeadlines.slack + 1)
        #expect(deadlines.expired(at: at(20_000)) { live.contains($0) } == ["stuck"])
    }
}

/// `PendingRequests` with one timer for all timeouts, on swift-clocks' `TestClock`: each request
/// fails at its own deadline, not before, whatever the order the deadlines were set in.
@Suite("Pending requests' timeouts on a test clock", .timeLimit(.minutes(1)))
struct PendingRequestTimeoutTests {
    let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
    let testClock = TestClock()
    let clock: PeerClock
    let pending: PendingRequests

    init() {
        clock = PeerClock(testClock)
        pending = PendingRequests(clock: clock)
    }

    private struct TimedOut: Error, Equatable { var id: String }

    /// Registers request `id` with a timeout `seconds` from now and waits for it in a task;
    /// the task's value is the error it ended with (nil: a reply).
    private func request(_ id: String, timeout seconds: Int) -> Task<TimedOut?, Never> {
        let pending = pending
        pending.register(id: id, peerID: "B", timeout: .init(after: .seconds(seconds), eventLoop: eventLoop) {
            TimedOut(id: id)
        })
        return Task {
            do {
                _ = try await withCheckedThrowingContinuation { continuation in
                    if let ended = pending.attach(id: id, continuation: continuation) { continuation.resume(with: ended) }
                }
                return nil
            } catch {
                return error as? TimedOut
            }
        }
    }

    /// Answers request `id`, as a reply from its peer would.
    private func answer(_ id: String) -> Bool {
        pending.resolve(Envelope(type: "Answer", replyTo: id, payload: ByteBuffer(string: "{}")), from: "B")
    }

    /// Advances the clock by `duration` and lets every timer that fell due run.
    private func advance(by duration: Duration) async throws {
        await testClock.advance(by: duration)
        try await clock.runDueTimers(on: eventLoop)
        #expect(!clock.hasDueTimers)
    }

    @Test("a shorter timeout set after a longer one fails first, at its own deadline; each fails at its own")
    func earlierDeadlineArmsAnew() async throws {
        let long = request("long", timeout: 5)
        let short = request("short", timeout: 1)
        let answered = request("answered", timeout: 2)
        #expect(answer("answered"))
        #expect(await answered.value == nil, "a request answered before its deadline does not time out")

        try await advance(by: .milliseconds(999))
        // Required, not expected: a request whose timer is not armed would be awaited forever below.
        try #require(clock.timeUntilNextTimer == .milliseconds(1), "the timer is armed for the shorter timeout")
        try await advance(by: .milliseconds(1))
        #expect(await short.value == TimedOut(id: "short"))
        try #require(clock.timeUntilNextTimer == .seconds(4), "then for the longer one, skipping the answered request")
        try await advance(by: .seconds(4) - .milliseconds(1))
        try await advance(by: .milliseconds(1))
        #expect(await long.value == TimedOut(id: "long"))
        #expect(clock.timeUntilNextTimer == nil, "nothing is armed once no request waits")
    }

    @Test("a run of requests with the same timeout, each answered, arms one timer; the last one still times out")
    func oneTimerForARun() async throws {
        for n in 0..<100 {
            let task = request("r\(n)", timeout: 5)
            #expect(answer("r\(n)"))
            #expect(await task.value == nil)
            pending.remove(id: "r\(n)")
            try await advance(by: .milliseconds(10))
        }
        // The timer armed for the first request's deadline is the only one: it fires then, finds
        // nothing due, and arms nothing.
        #expect(clock.timeUntilNextTimer == .seconds(4))
        let last = request("last", timeout: 5)
        try await advance(by: .seconds(4))
        try #require(clock.timeUntilNextTimer == .seconds(1), "the last request's deadline")
        try await advance(by: .seconds(1))
        #expect(await last.value == TimedOut(id: "last"))
    }

    @Test("stopping fails every request and disarms the timer")
    func stopDisarms() async throws {
        let waiting = request("w", timeout: 5)
        #expect(clock.timeUntilNextTimer == .seconds(5))
        pending.failAll(with: TimedOut(id: "stopped"))
        #expect(await waiting.value == TimedOut(id: "stopped"))
        #expect(clock.timeUntilNextTimer == nil)
    }
}
