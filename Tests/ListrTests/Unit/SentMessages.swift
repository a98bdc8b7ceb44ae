import ListrKit
import PeerKit
import Synchronization

/// What a ``ListrWatchers`` pushed, in order, for tests; `send` can be held back to make a
/// watcher slow.
final class SentMessages: Sendable {
    struct Sent: Hashable {
        var peer: String
        var message: ListrWatchers.Message
    }

    private let sent = Mutex<[Sent]>([])

    /// Everything pushed so far.
    var messages: [Sent] { sent.withLock { $0 } }

    /// The item of the first change pushed.
    var firstItem: Item? {
        sent.withLock { sent in
            guard case let .change(change)? = sent.first?.message else { return nil }
            return change.item
        }
    }

    func append(_ message: ListrWatchers.Message, to peer: Peer) {
        sent.withLock { $0.append(Sent(peer: peer.id, message: message)) }
    }

    /// Waits (at most 10 s) until `count` messages were pushed.
    func waitFor(count: Int) async throws {
        try await waitFor { $0.count >= count }
    }

    /// Waits (at most 10 s) until `condition` holds for the messages pushed.
    func waitFor(_ condition: ([Sent]) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition(messages) {
            guard ContinuousClock.now < deadline else {
                throw TestFailure("What was pushed within 10 s (\(messages.count) messages) is not what was expected.")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}
