import NIOConcurrencyHelpers
import Foundation

/// Hands every ``PeerEvent`` to the `events()` subscribers and to the closure properties, in order.
///
/// Subscribers get events straight away; closures are called one at a time by a child task of the
/// transceiver's run (``deliverCallbacks(_:)``), so a slow closure never holds up the connection layer.
final class PeerEventHub: Sendable {
    /// The MultipeerKit-style closure properties of ``PeerTransceiver``.
    struct Callbacks: Sendable {
        var peerAdded: @Sendable (Peer) -> Void = { _ in }
        var peerRemoved: @Sendable (Peer) -> Void = { _ in }
        var peerConnected: @Sendable (Peer) -> Void = { _ in }
        var peerDisconnected: @Sendable (Peer) -> Void = { _ in }
        var availablePeersDidChange: @Sendable ([Peer]) -> Void = { _ in }
    }

    let callbacks = NIOLockedValueBox(Callbacks())
    private let subscribers = NIOLockedValueBox<[UUID: AsyncStream<PeerEvent>.Continuation]>([:])
    /// The events of the current run, for the closures; nil between runs.
    private let callbackRun = NIOLockedValueBox<AsyncStream<PeerEvent>.Continuation?>(nil)
    /// Called synchronously with each event (for `PeerKitTesting`'s event recorder); they must
    /// not block.
    private let observers = NIOLockedValueBox<[UUID: @Sendable (PeerEvent) -> Void]>([:])

    init() {}

    /// Delivers `event` to every subscriber and queues it for the closures. Never blocks.
    func publish(_ event: PeerEvent) {
        for observer in observers.withLockedValue({ Array($0.values) }) { observer(event) }
        callbackRun.withLockedValue { $0 }?.yield(event)
        for subscriber in subscribers.withLockedValue({ Array($0.values) }) {
            subscriber.yield(event)
        }
    }

    /// The events of a run that is starting, for ``deliverCallbacks(_:)``: every event published
    /// until the run ends (``detachCallbacks()``).
    func beginCallbacks() -> AsyncStream<PeerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: PeerEvent.self)
        let previous = callbackRun.withLockedValue { current in
            defer { current = continuation }
            return current
        }
        previous?.finish()
        return stream
    }

    /// Takes the current run's closure events away, so that nothing is published to them any
    /// more; the run that ends finishes them (``publishStopped(callbacks:)``, or `finish()` for a
    /// run that failed to start). Taken under the lock that ends the run, so that a run starting
    /// right after never has its own events finished by the one that ended.
    func detachCallbacks() -> AsyncStream<PeerEvent>.Continuation? {
        callbackRun.withLockedValue { current in
            defer { current = nil }
            return current
        }
    }

    /// Ends the current run's closure events.
    func endCallbacks() {
        detachCallbacks()?.finish()
    }

    /// Calls the closures for each event of one run, one at a time, until the run ends. Runs as a
    /// child task of the run, so a slow closure never holds up the connection layer.
    func deliverCallbacks(_ events: AsyncStream<PeerEvent>) async {
        for await event in events {
            let current = callbacks.withLockedValue { $0 }
            switch event {
            case let .peerAdded(peer): current.peerAdded(peer)
            case let .peerRemoved(peer): current.peerRemoved(peer)
            case let .peerConnected(peer): current.peerConnected(peer)
            case let .peerDisconnected(peer, _): current.peerDisconnected(peer)
            case let .availablePeersChanged(peers): current.availablePeersDidChange(peers)
            case .started, .stopped, .error, .knownPeersListed, .peerJoinedGroup, .peerLeftGroup, .peerSuspended, .peerResumed: break
            }
        }
    }

    /// Delivers ``PeerEvent/stopped`` and then finishes every subscriber's stream: a stream
    /// belongs to one run of the transceiver. `callbacks` are the ended run's closure events
    /// (``detachCallbacks()``); the closures keep working across restarts.
    func publishStopped(callbacks run: AsyncStream<PeerEvent>.Continuation?) {
        for observer in observers.withLockedValue({ Array($0.values) }) { observer(.stopped) }
        if let run {
            run.yield(.stopped)
            run.finish()
        }
        let ending = subscribers.withLockedValue { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for subscriber in ending {
            subscriber.yield(.stopped)
            subscriber.finish()
        }
    }

    /// A new stream of every event published from now on.
    /// Calls `observer` with every event from now on, synchronously, until ``removeObserver(_:)``.
    func observe(_ observer: @escaping @Sendable (PeerEvent) -> Void) -> UUID {
        let id = UUID()
        observers.withLockedValue { $0[id] = observer }
        return id
    }

    /// Stops calling an observer.
    func removeObserver(_ id: UUID) {
        _ = observers.withLockedValue { $0.removeValue(forKey: id) }
    }

    func subscribe() -> AsyncStream<PeerEvent> {
        let id = UUID()
        let (stream, continuation) = AsyncStream.makeStream(of: PeerEvent.self)
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLockedValue { $0.removeValue(forKey: id) }
        }
        subscribers.withLockedValue { $0[id] = continuation }
        return stream
    }

    /// Ends every stream, the closures' included.
    func finish() {
        endCallbacks()
        for subscriber in subscribers.withLockedValue({ Array($0.values) }) {
            subscriber.finish()
        }
    }
}
