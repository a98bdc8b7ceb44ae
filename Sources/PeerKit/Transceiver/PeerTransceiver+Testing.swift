import Foundation

// Hooks for `PeerKitTesting`'s `TestNetwork`, at `package` level: not public API.

extension PeerTransceiver {
    /// Messages received and not yet handled (queued for their handler, or in it): what a test
    /// network's `settle()` waits for. Package-level: not public API.
    package var unhandledMessageCount: Int {
        session?.dispatcher.unfinishedCount ?? 0
    }

    /// Whether a timer of a non-real clock is due and has not run yet: work in flight, for a
    /// test network's `settle()`. Package-level: not public API.
    package var hasDueTimers: Bool {
        clock.hasDueTimers
    }

    /// How long until the next timer of a non-real clock is due (zero when one is due and has not
    /// run); nil when none is pending: how far a test network may move its clock in one step
    /// without passing a deadline. Package-level: not public API.
    package var timeUntilNextTimer: Duration? {
        clock.timeUntilNextTimer
    }

    /// Calls `observer` synchronously with every event from now on (the event stream delivers
    /// them later, from a task): for a test network's event recorder. Returns a token for
    /// ``removeEventObserver(_:)``. Package-level: not public API.
    package func observeEvents(_ observer: @escaping @Sendable (PeerEvent) -> Void) -> UUID {
        hub.observe(observer)
    }

    /// Stops an observer added with ``observeEvents(_:)``.
    package func removeEventObserver(_ token: UUID) {
        hub.removeObserver(token)
    }
}
