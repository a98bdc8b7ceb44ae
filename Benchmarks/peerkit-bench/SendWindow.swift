import Synchronization

/// The sender's half of the one-way flow control: tracks the highest `seq` each receiver has
/// acknowledged and makes the sender wait while more than `window` messages are unacknowledged.
final class SendWindow: Sendable {
    private struct State {
        var acknowledged: [String: Int] = [:]
        var finished: Set<String> = []
        var waiter: (limit: Int, continuation: CheckedContinuation<Void, Never>)?
        var endWaiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    private let receivers: [String]

    /// A window over the receivers with these peer IDs.
    init(receivers: [String]) {
        self.receivers = receivers
    }

    /// Records an acknowledgement from `peerID`.
    func acknowledge(_ seq: Int, from peerID: String) {
        let resumed: [CheckedContinuation<Void, Never>] = state.withLock { state in
            var resumed: [CheckedContinuation<Void, Never>] = []
            if seq == BenchPayload.endOfRun {
                state.finished.insert(peerID)
                if state.finished.count == receivers.count, let waiter = state.endWaiter {
                    state.endWaiter = nil
                    resumed.append(waiter)
                }
            } else {
                state.acknowledged[peerID] = max(state.acknowledged[peerID] ?? -1, seq)
                if let waiter = state.waiter, lowest(state) >= waiter.limit {
                    state.waiter = nil
                    resumed.append(waiter.continuation)
                }
            }
            return resumed
        }
        resumed.forEach { $0.resume() }
    }

    /// Returns once every receiver has acknowledged `seq` or more.
    func waitUntilAcknowledged(_ seq: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if lowest(state) >= seq { return true }
                state.waiter = (seq, continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Returns once every receiver has acknowledged the end of the run.
    func waitForEnd() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.finished.count == receivers.count { return true }
                state.endWaiter = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private func lowest(_ state: State) -> Int {
        receivers.map { state.acknowledged[$0] ?? -1 }.min() ?? -1
    }
}
