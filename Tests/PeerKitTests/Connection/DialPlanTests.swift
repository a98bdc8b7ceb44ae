import Testing
@testable import PeerKit

@Suite("Dialling every endpoint of a service (Happy Eyeballs, RFC 8305)")
struct DialPlanTests {
    private let v4a = PeerEndpoint(host: "10.0.0.2", port: 7000)
    private let v4b = PeerEndpoint(host: "172.17.0.1", port: 7000)
    private let v6a = PeerEndpoint(host: "fe80::2%veth0", port: 7000)
    private let v6b = PeerEndpoint(host: "2001:db8::2", port: 7000)
    private let delay = DialPlan.defaultAttemptDelay

    @Test("endpoints are tried IPv6 first, then alternating families")
    func ordering() {
        #expect(DialPlan.interleaved([v4a, v4b, v6a, v6b]) == [v6a, v4a, v6b, v4b])
        #expect(DialPlan.interleaved([v4a, v4b]) == [v4a, v4b])
        #expect(DialPlan.interleaved([v6a, v4a, v4b]) == [v6a, v4a, v4b])
    }

    @Test("the first attempt starts at once and the next only when the attempt delay passes")
    func attemptDelay() {
        var plan = DialPlan(endpoints: [v4a, v6a])
        #expect(plan.start() == [.connect(v6a), .armTimer(delay)])
        #expect(plan.timerFired() == [.connect(v4a), .armTimer(delay)])
        #expect(plan.inFlight == [v6a, v4a])
    }

    @Test("a failed attempt starts the next one at once, without waiting for the delay")
    func failureStartsNext() {
        var plan = DialPlan(endpoints: [v4a, v6a])
        _ = plan.start()
        #expect(plan.attemptFailed(v6a, reason: "refused") == [.connect(v4a), .armTimer(delay)])
        #expect(plan.phase == .running)
    }

    @Test("the first connection to connect wins and the attempts still under way are cancelled")
    func firstConnectedWins() {
        var plan = DialPlan(endpoints: [v4a, v6a, v4b])
        _ = plan.start()
        _ = plan.timerFired()
        _ = plan.timerFired()
        #expect(plan.attemptConnected(v4a) == [.cancel([v6a, v4b])])
        #expect(plan.phase == .connected(v4a))
        // One that connects after the winner is closed too; nothing else starts.
        #expect(plan.attemptConnected(v6a) == [.cancel([v6a])])
        #expect(plan.timerFired() == [])
        #expect(plan.attemptFailed(v4b, reason: "cancelled") == [])
    }

    @Test("the dial fails only when every endpoint failed, with every reason")
    func failsWhenAllFailed() {
        var plan = DialPlan(endpoints: [v4a, v6a])
        _ = plan.start()
        _ = plan.timerFired()
        #expect(plan.attemptFailed(v6a, reason: "v6 refused") == [])
        #expect(plan.phase == .running)
        #expect(plan.attemptFailed(v4a, reason: "v4 refused") == [.failed(["v6 refused", "v4 refused"])])
        #expect(plan.phase == .failed)
    }

    @Test("a dial that failed with every endpoint refusing says so; one refusal beside a timeout, or no endpoint at all, does not")
    func everyEndpointRefused() {
        var refused = DialPlan(endpoints: [v4a, v6a])
        _ = refused.start()
        _ = refused.attemptFailed(v6a, reason: "v6 refused", refused: true)
        #expect(!refused.everyEndpointRefused, "still running")
        #expect(refused.attemptFailed(v4a, reason: "v4 refused", refused: true) == [.failed(["v6 refused", "v4 refused"])])
        #expect(refused.everyEndpointRefused)

        // A link that is down: the attempt times out (the timer fires with nothing left to try).
        var mixed = DialPlan(endpoints: [v4a, v6a])
        _ = mixed.start()
        _ = mixed.attemptFailed(v6a, reason: "v6 refused", refused: true)
        #expect(mixed.attemptFailed(v4a, reason: "v4 timed out") == [.failed(["v6 refused", "v4 timed out"])])
        #expect(!mixed.everyEndpointRefused)

        var none = DialPlan(endpoints: [])
        #expect(none.start() == [.failed(["it advertises no address"])])
        #expect(!none.everyEndpointRefused)
    }

    @Test("while discovery is still resolving, a dial whose endpoints all failed waits for the attempt delay")
    func lingersWhileResolving() {
        var plan = DialPlan(endpoints: [v4a, v6a], lingers: true)
        _ = plan.start()
        _ = plan.timerFired()
        #expect(plan.attemptFailed(v6a, reason: "v6 refused") == [])
        // The second attempt's timer is still armed: a late address could still join.
        #expect(plan.attemptFailed(v4a, reason: "v4 refused") == [])
        #expect(plan.timerFired() == [.failed(["v6 refused", "v4 refused"])])
    }

    @Test("a lingering dial fails at once when discovery says nothing more is coming")
    func resolutionSettled() {
        var plan = DialPlan(endpoints: [v4a], lingers: true)
        _ = plan.start()
        #expect(plan.attemptFailed(v4a, reason: "refused") == [])
        #expect(plan.add([v4a], stillResolving: false) == [.failed(["refused"])])
    }

    @Test("an address resolved a moment after the first joins the dial instead of the dial failing")
    func lateAddressJoins() {
        // Avahi resolved the IPv6 address first (the IPv4 one is still being resolved); it is
        // refused within a millisecond.
        var plan = DialPlan(endpoints: [v6a], lingers: true)
        _ = plan.start()
        #expect(plan.attemptFailed(v6a, reason: "refused") == [])
        #expect(plan.phase == .running)
        // The IPv4 resolution arrives 30 ms later, before the attempt delay is over.
        #expect(plan.add([v6a, v4a], stillResolving: false) == [])
        #expect(plan.timerFired() == [.connect(v4a), .armTimer(delay)])
        #expect(plan.attemptConnected(v4a) == [])
        #expect(plan.phase == .connected(v4a))
    }

    @Test("an address that arrives while nothing new has started for the attempt delay starts at once")
    func lateAddressStartsAtOnce() {
        var plan = DialPlan(endpoints: [v4b])
        _ = plan.start()
        // The first attempt hangs (an address that does not answer); the timer fired long ago.
        #expect(plan.timerFired() == [])
        #expect(plan.add([v4b, v6b]) == [.connect(v6b), .armTimer(delay)])
        #expect(plan.inFlight == [v4b, v6b])
    }

    @Test("an endpoint reported again is not tried twice")
    func noDuplicates() {
        var plan = DialPlan(endpoints: [v4a, v4a])
        _ = plan.start()
        #expect(plan.add([v4a]) == [])
        #expect(plan.attemptFailed(v4a, reason: "refused") == [.failed(["refused"])])
    }

    @Test("a service without any endpoint fails at once")
    func noEndpoints() {
        var plan = DialPlan(endpoints: [])
        #expect(plan.start() == [.failed(["it advertises no address"])])
    }
}
