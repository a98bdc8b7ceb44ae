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
/// - at most ``maximumQueuedBytes`` of changes (``ListrLimits/maximumQueuedChangeBytesPerWatcher``,
///   measured with ``queuedBytes(of:)``) waiting for one watcher above PeerKit's outbox: a
///   watcher further behind is dropped with ``ListrError/watcherFellBehind(queuedBytes:limit:)``,
///   what was queued for it is freed at once, `dropped` hears of it (listrd logs it), and the
///   watcher is told with a ``WatchEndedEvent`` once the send in progress, if any, is done (it can
///   watch again and start from the current list). Every watcher's queue together holds at most
///   ``maximumWatchers`` × ``maximumQueuedBytes``.
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

    /// The most bytes of changes queued for one watcher before it is dropped.
    public let maximumQueuedBytes: Int

    /// One watcher's queue and the task that empties it.
    private final class Watcher: Sendable {
        /// What the task does next.
        enum Next: Sendable {
            case send(ListrChange)
            case tell(ListrError)
            case stop
        }

        private struct Queue {
            var changes: [ListrChange] = []
            var head = 0
            var bytes = 0
            /// Set once the watcher fell behind: what the task tells it before it stops.
            var fellBehind: ListrError?
            var stopped = false
            var waiting: CheckedContinuation<Void, Never>?
        }

        private let queue = Mutex(Queue())
        let task: Mutex<Task<Void, Never>?> = Mutex(nil)

        /// Queues `change` (`bytes` long); returns the error when it makes the queue longer than
        /// `limit` (the queue is then emptied, and the watcher is to be told and dropped).
        func enqueue(_ change: ListrChange, bytes: Int, limit: Int) -> ListrError? {
            let (waiting, error) = queue.withLock { queue -> (CheckedContinuation<Void, Never>?, ListrError?) in
                guard !queue.stopped, queue.fellBehind == nil else { return (nil, nil) }
                if queue.bytes + bytes > limit {
                    let error = ListrError.watcherFellBehind(queuedBytes: queue.bytes + bytes, limit: limit)
                    queue.fellBehind = error
                    queue.changes = []
                    queue.head = 0
                    queue.bytes = 0
                    defer { queue.waiting = nil }
                    return (queue.waiting, error)
                }
                queue.changes.append(change)
                queue.bytes += bytes
                defer { queue.waiting = nil }
                return (queue.waiting, nil)
            }
            waiting?.resume()
            return error
        }

        /// Stops the task: nothing more is sent, what is queued is freed.
        func stop() {
            let waiting = queue.withLock { queue -> CheckedContinuation<Void, Never>? in
                queue.stopped = true
                queue.changes = []
                queue.head = 0
                queue.bytes = 0
                defer { queue.waiting = nil }
                return queue.waiting
            }
            waiting?.resume()
            task.withLock { $0?.cancel() }
        }

        /// The next thing to do, waiting for a change when there is none.
        func next() async -> Next {
            while true {
                if let next = take() { return next }
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = queue.withLock { queue -> Bool in
                        if queue.stopped || queue.fellBehind != nil || queue.head < queue.changes.count { return true }
                        queue.waiting = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
        }

        private func take() -> Next? {
            queue.withLock { queue -> Next? in
                if queue.stopped || Task.isCancelled { return .stop }
                if let error = queue.fellBehind { return .tell(error) }
                guard queue.head < queue.changes.count else { return nil }
                let change = queue.changes[queue.head]
                queue.head += 1
                queue.bytes -= ListrWatchers.queuedBytes(of: change)
                if queue.head == queue.changes.count {
                    queue.changes.removeAll(keepingCapacity: true)
                    queue.head = 0
                } else if queue.head >= 1024, queue.head * 2 >= queue.changes.count {
                    queue.changes.removeFirst(queue.head)
                    queue.head = 0
                }
                return .send(change)
            }
        }
    }

    /// Told about a watcher dropped because pushing to it failed (with what `send` threw) or
    /// because it fell behind (with ``ListrError/watcherFellBehind(queuedBytes:limit:)``), after
    /// it was removed.
    public typealias Dropped = @Sendable (Peer, any Error) -> Void

    private let send: Send
    private let dropped: Dropped
    private let watchers: Mutex<[String: (peer: Peer, watcher: Watcher)]> = Mutex([:])

    /// Creates an empty set of watchers that pushes with `send`; `dropped` is told about each
    /// watcher removed because `send` threw or because it fell more than `maximumQueuedBytes`
    /// behind, after it was removed.
    public init(
        maximumQueuedBytes: Int = ListrLimits.maximumQueuedChangeBytesPerWatcher,
        send: @escaping Send,
        dropped: @escaping Dropped = { _, _ in }
    ) {
        self.maximumQueuedBytes = maximumQueuedBytes
        self.send = send
        self.dropped = dropped
    }

    /// What a change counts for in a watcher's queue: the length of its strings (client, title,
    /// settings name) and 192 bytes for the rest of its JSON, about what it takes in memory and
    /// on the wire.
    public static func queuedBytes(of change: ListrChange) -> Int {
        192 + change.client.utf8.count + (change.item?.title.utf8.count ?? 0) + (change.settings?.name.utf8.count ?? 0)
    }

    /// How many watchers there are.
    public var count: Int { watchers.withLock { $0.count } }

    /// Whether `peer` is watching.
    public func contains(_ peer: Peer) -> Bool { watchers.withLock { $0[peer.id] != nil } }

    /// Subscribes `peer` to every change published from now on (a peer already watching starts
    /// over). Throws ``ListrError/tooManyWatchers(limit:)`` when ``maximumWatchers`` are watching.
    public func add(_ peer: Peer) throws(ListrError) {
        let watcher = Watcher()
        let replaced: Watcher?? = watchers.withLock { watchers -> Watcher?? in
            if watchers[peer.id] == nil, watchers.count >= Self.maximumWatchers { return .none }
            let old = watchers[peer.id]?.watcher
            watchers[peer.id] = (peer, watcher)
            return .some(old)
        }
        guard let replaced else { throw .tooManyWatchers(limit: Self.maximumWatchers) }
        replaced?.stop()
        let send = send
        let dropped = dropped
        let task = Task { [weak self] in
            while true {
                switch await watcher.next() {
                case let .send(change):
                    do {
                        try await send(.change(change), peer)
                    } catch {
                        if self?.remove(peer, ifStill: watcher) == true { dropped(peer, error) }
                        return
                    }
                case let .tell(error):
                    // Already removed (see publish): told if it can still be reached.
                    try? await send(.ended(WatchEndedEvent(reason: error.description)), peer)
                    return
                case .stop:
                    return
                }
            }
        }
        watcher.task.withLock { $0 = task }
    }

    /// Unsubscribes `peer` (its connection ended); changes queued for it are dropped.
    public func remove(_ peer: Peer) {
        let removed = watchers.withLock { $0.removeValue(forKey: peer.id)?.watcher }
        removed?.stop()
    }

    /// Unsubscribes everyone.
    public func removeAll() {
        let removed = watchers.withLock { watchers in
            defer { watchers.removeAll() }
            return watchers.values.map(\.watcher)
        }
        removed.forEach { $0.stop() }
    }

    /// Queues `change` for every watcher, without waiting for anything; a watcher it puts more
    /// than ``maximumQueuedBytes`` behind is dropped (see the type's documentation).
    public func publish(_ change: ListrChange) {
        let bytes = Self.queuedBytes(of: change)
        let entries = watchers.withLock { Array($0.values) }
        var behind: [(peer: Peer, watcher: Watcher, error: ListrError)] = []
        for entry in entries {
            if let error = entry.watcher.enqueue(change, bytes: bytes, limit: maximumQueuedBytes) {
                behind.append((entry.peer, entry.watcher, error))
            }
        }
        for (peer, watcher, error) in behind {
            // Dropped, but its task goes on long enough to tell it (see Watcher.next()).
            let removed = watchers.withLock { watchers -> Bool in
                guard watchers[peer.id]?.watcher === watcher else { return false }
                watchers.removeValue(forKey: peer.id)
                return true
            }
            if removed { dropped(peer, error) }
        }
    }

    /// Removes `peer` if `watcher` is still its watcher; returns whether it did.
    private func remove(_ peer: Peer, ifStill watcher: Watcher) -> Bool {
        let removed = watchers.withLock { watchers -> Watcher? in
            guard watchers[peer.id]?.watcher === watcher else { return nil }
            return watchers.removeValue(forKey: peer.id)?.watcher
        }
        removed?.stop()
        return removed != nil
    }
}
