import Clocks
@testable import PeerKit

/// Moves `clock`, the clock of `transceiver`, past every delay after which a refused peer could be
/// redialled (the back-off's longest, 36 s with jitter, and the connect and handshake timeouts), one
/// second at a time, each time waiting until every timer then due has run; returns how long until
/// the transceiver's next timer. Nil means no timer is left at all: no redial is scheduled, and
/// none happened (a dial arms a connect-timeout timer on the clock). This replaces waiting a few
/// seconds of wall-clock time to see that nothing happens.
func timeUntilNextTimerAfterAdvancing(_ transceiver: PeerTransceiver, clock: TestClock<Duration>, seconds: Int = 40) async throws -> Duration? {
    for _ in 0..<seconds {
        await clock.advance(by: .seconds(1))
        try await within(20, "the timers now due to run") {
            while transceiver.hasDueTimers { try await Task.sleep(for: .milliseconds(2)) }
        }
    }
    return transceiver.timeUntilNextTimer
}
