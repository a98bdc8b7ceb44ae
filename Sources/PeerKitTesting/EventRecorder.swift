import Foundation
import NIOConcurrencyHelpers
import PeerKit

/// Records a transceiver's events from the moment it is made, for tests that check what
/// happened: ``events``, or wait with ``waitFor(_:where:)``.
///
/// Events are recorded as they are published, synchronously, so that once a
/// ``TestNetwork/settle()`` returns, every event of what happened is in ``events``.
public final class EventRecorder: Sendable {
    private let recorded = NIOLockedValueBox<[PeerEvent]>([])
    private let network: TestNetwork
    private let transceiver: PeerTransceiver
    private let token: UUID

    /// Starts recording `transceiver`'s events (make it before the action whose events you
    /// expect: events are not replayed).
    public init(_ transceiver: PeerTransceiver, on network: TestNetwork) {
        self.network = network
        self.transceiver = transceiver
        let recorded = recorded
        token = transceiver.observeEvents { event in recorded.withLockedValue { $0.append(event) } }
    }

    deinit {
        transceiver.removeEventObserver(token)
    }

    /// The events so far, in order.
    public var events: [PeerEvent] { recorded.withLockedValue { $0 } }

    /// Waits until an event matching `predicate` was recorded and returns the first one; throws
    /// ``TestNetworkError/neverHappened(_:)`` when the network went quiet without one.
    @discardableResult
    public func waitFor(_ what: String, where predicate: @escaping @Sendable (PeerEvent) -> Bool) async throws -> PeerEvent {
        try await network.eventually(what) { self.events.contains(where: predicate) }
        guard let event = events.first(where: predicate) else { throw TestNetworkError.neverHappened(what) }
        return event
    }
}
