import PeerKit
import Synchronization

/// The clients watching the list: each gets every change, in order, from a task of its own, so a
/// slow watcher never holds up the store or the other watchers.
///
/// This is the whole subscription logic; it knows no sockets. listrd gives it a `send` closure
/// that pushes a message to one peer with `PeerTransceiver.send(_:to:)`, adds the sender of each
/// ``WatchCommand``, and removes a watcher when its connection ends. (When PeerKit gets groups, this
/// type is what becomes a group.)
///
/// Limits, so that watchers cannot make listrd spend without bound:
/// - at most ``maximumWatchers`` watchers; one more is refused with ``ListrError/tooManyWatchers(limit:)``;
/// - at most ``maximumPendingChanges`` changes queued for one watcher; a watcher that falls further
///   behind is dropped and told so with a ``WatchEndedEvent`` (it can watch again and start from
///   the current list).
public final class ListrWatchers: Sendable {
    /// What is pushed to a watcher.
    public enum Message: Sendable, Hashable {
        /// A change to the list or the settings.
        case change(ListrChange)
        /// The watch ended; the watcher is no longer subscribed.
        case ended(WatchEndedEvent)
    }

    /// Pushes one message to one watcher; throwing drops the watcher.
    public typealias Send = @Sendable (Message, Peer) async throws -> Void

    /// The most watchers served at once: 64.
    public static let maximumWatchers = 64
    /// The most changes queued for one watcher before it is dropped: 1,024.
    public static let maximumPendingChanges = 1024

    private final class Watcher: Sendable {
        let continuation: AsyncStream<ListrChange>.Continuation
        let overflowed = Atomic<Bool>(false)
        let task: Mutex<Task<Void, Never>?> = Mutex(nil)

        init(continuation: AsyncStream<ListrChange>.Continuation) {
            self.continuation = continuation
        }
    }

    /// Told about a watcher dropped because pushing to it failed, after it was removed.
    public typealias Dropped = @Sendable (Peer, any Error) -> Void

    private let send: Send
    private let dropped: Dropped
    private let watchers: Mutex<[String: (peer: Peer, watcher: Watcher)]> = Mutex([:])

    /// Creates an empty set of watchers that pushes with `send`; `dropped` is told about each
    /// watcher removed because `send` threw (with what it threw), after it was removed.
    public init(send: @escaping Send, dropped: @escaping Dropped = { _, _ in }) {
        self.send = send
        self.dropped = dropped
    }

    /// How many watchers there are.
    public var count: Int { watchers.withLock { $0.count } }

    /// Whether `peer` is watching.
    public func contains(_ peer: Peer) -> Bool { watchers.withLock { $0[peer.id] != nil } }

    /// Subscribes `peer` to every change published from now on (a peer already watching starts
    /// over). Throws ``ListrError/tooManyWatchers(limit:)`` when ``maximumWatchers`` are watching.
    public func add(_ peer: Peer) throws(ListrError) {
        let (stream, continuation) = AsyncStream.makeStream(
            of: ListrChange.self,
            bufferingPolicy: .bufferingOldest(Self.maximumPendingChanges)
        )
        let watcher = Watcher(continuation: continuation)
        let replaced: Watcher?? = watchers.withLock { watchers -> Watcher?? in
            if watchers[peer.id] == nil, watchers.count >= Self.maximumWatchers { return .none }
            let old = watchers[peer.id]?.watcher
            watchers[peer.id] = (peer, watcher)
            return .some(old)
        }
        guard let replaced else { throw .tooManyWatchers(limit: Self.maximumWatchers) }
        replaced.map(stop)
        let send = send
        let dropped = dropped
        let task = Task { [weak self] in
            for await change in stream {
                do {
                    try await send(.change(change), peer)
                } catch {
                    if self?.remove(peer, ifStill: watcher) == true { dropped(peer, error) }
                    return
                }
            }
            if watcher.overflowed.load(ordering: .acquiring) {
                let reason = "listrd dropped this watch because it fell more than \(Self.maximumPendingChanges) changes behind. Watch again to start from the current list."
                try? await send(.ended(WatchEndedEvent(reason: reason)), peer)
            }
        }
        watcher.task.withLock { $0 = task }
    }

    /// Unsubscribes `peer` (its connection ended); changes queued for it are dropped.
    public func remove(_ peer: Peer) {
        let removed = watchers.withLock { $0.removeValue(forKey: peer.id)?.watcher }
        removed.map(stop)
    }

    /// Unsubscribes everyone.
    public func removeAll() {
        let removed = watchers.withLock { watchers in
            defer { watchers.removeAll() }
            return watchers.values.map(\.watcher)
        }
        removed.forEach(stop)
    }

    /// Queues `change` for every watcher, without waiting for anything.
    public func publish(_ change: ListrChange) {
        let overflowing: [Peer] = watchers.withLock { watchers in
            watchers.values.compactMap { entry in
                if case .dropped = entry.watcher.continuation.yield(change) { return entry.peer }
                return nil
            }
        }
        for peer in overflowing {
            // Dropped, but not stopped: what is queued is still sent, then the WatchEndedEvent.
            let dropped = watchers.withLock { $0.removeValue(forKey: peer.id)?.watcher }
            dropped?.overflowed.store(true, ordering: .releasing)
            dropped?.continuation.finish()
        }
    }

    /// Removes `peer` if `watcher` is still its watcher; returns whether it did.
    private func remove(_ peer: Peer, ifStill watcher: Watcher) -> Bool {
        let removed = watchers.withLock { watchers -> Watcher? in
            guard watchers[peer.id]?.watcher === watcher else { return nil }
            return watchers.removeValue(forKey: peer.id)?.watcher
        }
        removed.map(stop)
        return removed != nil
    }

    private func stop(_ watcher: Watcher) {
        watcher.continuation.finish()
        watcher.task.withLock { $0?.cancel() }
    }
}
