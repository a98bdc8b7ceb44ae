import ListrKit
import PeerKit
import Synchronization

/// What a ``ListrWatchers`` pushed, in order, for tests, and the watchers it dropped because
/// their send failed. Waiting is by notification, not by polling a clock: ``waitFor(_:)``
/// returns when a push or a drop makes its condition true (the suites' time limit ends a test
/// that waits for something that never comes).
final class SentMessages: Sendable {
    struct Sent: Hashable {
        var peer: String
        var message: ListrWatchers.Message
    }

    private struct State {
        var sent: [Sent] = []
        var dropped: [String] = []
        var waiters: [(condition: @Sendable (SentMessages.Snapshot) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    /// What was pushed and dropped so far.
    struct Snapshot {
        var sent: [Sent]
        var dropped: [String]
    }

    private let state = Mutex(State())

    /// Everything pushed so far.
    var messages: [Sent] { state.withLock { $0.sent } }

    /// The ids of the watchers dropped so far because their send failed.
    var dropped: [String] { state.withLock { $0.dropped } }

    /// The item of the first change pushed.
    var firstItem: Item? {
        state.withLock { state in
            guard case let .change(change)? = state.sent.first?.message else { return nil }
            return change.item
        }
    }

    func append(_ message: ListrWatchers.Message, to peer: Peer) {
        update { $0.sent.append(Sent(peer: peer.id, message: message)) }
    }

    /// For ``ListrWatchers``' `dropped` hook.
    func drop(_ peer: Peer, _ error: any Error) {
        update { $0.dropped.append(peer.id) }
    }

    private func update(_ change: (inout State) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            change(&state)
            let snapshot = Snapshot(sent: state.sent, dropped: state.dropped)
            let ready = state.waiters.filter { $0.condition(snapshot) }.map(\.continuation)
            state.waiters.removeAll { $0.condition(snapshot) }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Waits until `count` messages were pushed.
    func waitFor(count: Int) async {
        await waitFor { $0.count >= count }
    }

    /// Waits until `condition` holds for the messages pushed.
    func waitFor(_ condition: @escaping @Sendable ([Sent]) -> Bool) async {
        await waitUntil { condition($0.sent) }
    }

    /// Waits until `condition` holds for what was pushed and dropped.
    func waitUntil(_ condition: @escaping @Sendable (Snapshot) -> Bool) async {
        await withCheckedContinuation { continuation in
            let holds = state.withLock { state -> Bool in
                if condition(Snapshot(sent: state.sent, dropped: state.dropped)) { return true }
                state.waiters.append((condition, continuation))
                return false
            }
            if holds { continuation.resume() }
        }
    }
}
