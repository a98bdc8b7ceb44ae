import Testing
@testable import PeerKit

/// How a discovered service is dialled over time (``ServiceDialer``), with plain values: no
/// sockets, no clock, the back-off's jitter fixed.
@Suite("Service dialler (no I/O)")
struct ServiceDialerTests {
    typealias Dialer = ServiceDialer<String>

    /// Back-off without jitter: 0.5 s, doubling, up to 30 s; reached services capped at 2 s,
    /// suspended peers at 0.5 s; 4.5 s before redialling a peer that heard our hello late.
    let policy = Dialer.Policy(backoff: Backoff(initial: .milliseconds(500), maximum: .seconds(30), multiplier: 2, jitter: 0),
                               reachedCap: .seconds(2), suspendedInterval: .milliseconds(500), lateHelloInterval: .milliseconds(4500))

    @Test("a peer that closed our connection because our hello came late is redialled only after the late-hello interval, so that its own dial reaches us first")
    func heardUsLate() {
        var dialer = Dialer()
        _ = dialer.startDial()
        _ = dialer.reached()
        let late = dialer.connectionLost(policy: policy, random: 0.5, arming: 1, heardUsLate: true)
        #expect(late == .init(delay: .milliseconds(4500), arming: 1))
        _ = dialer.retryArmed("late", arming: 1)
        dialer.retryFired()
        let next = dialer.connectionLost(policy: policy, random: 0.5, arming: 2)
        #expect(next == .init(delay: .milliseconds(500), arming: 2), "only that loss waits longer")
    }

    @Test("one dial at a time; each failure backs off twice as long, up to the maximum, and says which attempt it was")
    func backoff() {
        var dialer = Dialer()
        let first = dialer.startDial()
        #expect(first == (true, nil))
        let second = dialer.startDial()
        #expect(second == (false, nil), "a dial is under way")
        var delays: [Duration] = []
        for arming in 1...8 {
            let (attempt, redial) = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: arming)
            #expect(attempt == arming - 1)
            #expect(redial.arming == arming)
            #expect(dialer.isRetrying)
            delays.append(redial.delay)
            let armed = dialer.retryArmed("timer \(arming)", arming: arming)
            #expect(armed)
            let next = dialer.startDial()
            #expect(next == (true, "timer \(arming)"), "the redial's own timer fired: it is forgotten")
        }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30)])
    }

    @Test("a service reached once is redialled at most every 2 s after failures, a suspended peer every 0.5 s")
    func caps() {
        var dialer = Dialer()
        _ = dialer.startDial()
        let failedBefore = dialer.reached()
        #expect(failedBefore == 0)
        #expect(dialer.wasReached)
        for arming in 1...5 {
            _ = dialer.startDial()
            let delay = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: arming).redial.delay
            #expect(delay <= .seconds(2))
            _ = dialer.cancelRetry()
        }
        _ = dialer.startDial()
        let suspended = dialer.failed(policy: policy, random: 0.5, peerSuspended: true, arming: 6)
        #expect(suspended.redial.delay == .milliseconds(500))
    }

    @Test("reaching the service reports the failed attempts before it and starts the count over")
    func reachedAfterFailures() {
        var dialer = Dialer()
        for arming in 1...3 {
            _ = dialer.startDial()
            _ = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: arming)
        }
        _ = dialer.startDial()
        let failedBefore = dialer.reached()
        #expect(failedBefore == 3)
        #expect(dialer.attempt == 0)
        #expect(!dialer.isDialling)
    }

    @Test("a new advertisement while backing off cancels the redial and starts the count over; otherwise it changes nothing")
    func advertisedAgain() {
        var dialer = Dialer()
        let idle = dialer.advertised()
        #expect(idle == nil)
        _ = dialer.startDial()
        _ = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: 1)
        _ = dialer.startDial()
        _ = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: 2)
        let armed = dialer.retryArmed("t2", arming: 2)
        #expect(armed)
        let cancelled = dialer.advertised()
        #expect(cancelled == "t2")
        #expect(dialer.attempt == 0)
        #expect(!dialer.isRetrying)
    }

    @Test("a lost connection arms the first redial unless a dial or a redial is under way")
    func connectionLost() {
        var dialer = Dialer()
        let lost = dialer.connectionLost(policy: policy, random: 0.5, arming: 1)
        #expect(lost == .init(delay: .milliseconds(500), arming: 1))
        let whileArming = dialer.connectionLost(policy: policy, random: 0.5, arming: 2)
        #expect(whileArming == nil, "a redial is being armed")
        let armed = dialer.retryArmed("t1", arming: 1)
        #expect(armed)
        let whileArmed = dialer.connectionLost(policy: policy, random: 0.5, arming: 3)
        #expect(whileArmed == nil, "a redial is armed")
        let dial = dialer.startDial()
        #expect(dial == (true, "t1"))
        let whileDialling = dialer.connectionLost(policy: policy, random: 0.5, arming: 4)
        #expect(whileDialling == nil, "a dial is under way")
    }

    @Test("a redial that comes due while the peer is connected another way is forgotten, so the next lost connection is redialled")
    func redialWhileConnected() {
        var dialer = Dialer()
        _ = dialer.startDial()
        _ = dialer.failed(policy: policy, random: 0.5, peerSuspended: true, arming: 1)
        let armed = dialer.retryArmed("t1", arming: 1)
        #expect(armed)
        // The peer dialled us meanwhile; the timer fires and the driver finds the peer connected,
        // so it starts no dial.
        dialer.retryFired()
        #expect(!dialer.isRetrying)
        #expect(dialer.retry == nil)
        let lost = dialer.connectionLost(policy: policy, random: 0.5, arming: 2)
        #expect(lost == .init(delay: .milliseconds(500), arming: 2))
    }

    @Test("a timer armed for a redial that was cancelled or replaced meanwhile is refused, so the driver cancels it")
    func staleTimer() {
        var dialer = Dialer()
        _ = dialer.startDial()
        _ = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: 1)
        let unarmed = dialer.cancelRetry()
        #expect(unarmed == nil, "not armed yet")
        let late = dialer.retryArmed("late", arming: 1)
        #expect(!late)
        _ = dialer.startDial()
        _ = dialer.failed(policy: policy, random: 0.5, peerSuspended: false, arming: 2)
        let stale = dialer.retryArmed("stale", arming: 1)
        #expect(!stale)
        let current = dialer.retryArmed("current", arming: 2)
        #expect(current)
        #expect(dialer.retry == "current")
    }
}
