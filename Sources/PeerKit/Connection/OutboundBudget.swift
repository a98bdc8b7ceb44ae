import Synchronization

/// What all of a transceiver's connections together may hold queued to send:
/// ``PeerConfiguration/maximumTotalQueuedOutboundBytes``, on top of each connection's own
/// ``PeerConfiguration/maximumQueuedOutboundBytes``.
///
/// Each connection's limit bounds one peer; this bounds them all, whatever the number of
/// connections. Every connection adds what it queues for its peer alone (its frames' bytes and a
/// per-frame overhead, ``PeerConnection/queuedCost(of:)``) and takes off what it writes or drops.
/// A broadcast's frame is not charged: it is one buffer in every peer's outbox, freed when the
/// slowest peer has taken it, so the memory it holds is bounded by one peer's limit whatever the
/// number of peers. While the budget is spent:
/// - a peer's handlers run only while nothing charged waits in its own outbox, so peers that do
///   not read their replies cannot make more of them (``ConnectionManager/outboxState(of:)``);
/// - a peer that holds ``PeerConnection/outboxHighWatermark`` or more of it for longer than
///   ``PeerConfiguration/slowPeerGracePeriod`` is disconnected as too slow, so that peers which
///   never read cannot keep the budget spent.
///
/// So the whole process holds at most the budget plus one frame per connection. Reads and
/// updates are single atomic operations: this is on every frame's path.
final class OutboundBudget: Sendable {
    /// The budget in bytes.
    let limit: Int

    private let queued = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// What all connections hold queued now.
    var total: Int { queued.load(ordering: .relaxed) }

    /// Whether the budget is spent: the connections together hold `limit` or more.
    var isSpent: Bool { total >= limit }

    /// A connection queued `cost` more.
    func added(_ cost: Int) {
        queued.wrappingAdd(cost, ordering: .relaxed)
    }

    /// A connection wrote or dropped `cost` of what it had queued. Returns true when this took
    /// the total from spent to below the budget: the peers held back can be served again.
    func removed(_ cost: Int) -> Bool {
        let after = queued.wrappingSubtract(cost, ordering: .relaxed).newValue
        return after < limit && after + cost >= limit
    }
}
