import Foundation

// Hooks for `PeerKitTesting`'s `TestNetwork`, at `package` level: not public API.

extension PeerTransceiver {
    /// Messages received and not yet handled (queued for their handler, or in it): what a test
    /// network's `settle()` waits for. Package-level: not public API.
    package var unhandledMessageCount: Int {
        session?.dispatcher.unfinishedCount ?? 0
    }

    /// Timers of a non-real clock whose task has not yet begun to sleep on it: a test network
    /// waits for none before it moves its clock, so that no timer misses its deadline.
    /// Package-level: not public API.
    package var startingTimerCount: Int {
        clock.startingTimers
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
