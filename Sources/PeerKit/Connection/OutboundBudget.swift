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
/// number of peers. A resumable session's frames (feature `resume`) are charged by the session
/// instead, from the moment it numbers them until the peer acknowledges them (a ``Share``), so
/// that a frame written and kept for a resend counts as long as it is held; and the frames held
/// for a peer while it switches to a tie-break's winner are charged by the hold (a ``Share`` too,
/// ``PeerStateMachine/Hold``) until they are moved to the winner or dropped. While the budget is spent:
/// - a peer's handlers run only while nothing charged waits in its own outbox, its session's
///   retransmit tail or its switch's hold, so peers that do not read (or do not acknowledge)
///   their replies cannot make more of them (``ConnectionManager/outboxState(of:)``);
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

    /// Whether the budget is spent or within a frame or so of it (a sixteenth of it, at most
    /// ``PeerConnection/outboxHighWatermark``): what the heartbeats judge peers by. Held at its
    /// limit, the total dips below it each time a frame is written and rises again as the next
    /// is made; a heartbeat that fell into such a dip would start a peer's grace period again.
    var isNearlySpent: Bool { total >= limit - min(limit / 16, PeerConnection.outboxHighWatermark) }

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

    /// One holder's part of the budget. A resumable session's (``PeerSession``): what its
    /// retransmit tail holds of frames charged to it, from the moment they are numbered until the
    /// peer acknowledges them or the session drops them; the connection's heartbeat reads it
    /// (``bytes``) to tell a peer that holds the spent budget without acknowledging. Or a switch's
    /// (``PeerStateMachine/Hold``): the frames held for the winner. Either changes it under the
    /// connection manager's lock.
    ///
    /// It cannot leak: what is still held when the share is released (a session discarded with
    /// frames in its tail, a hold dropped because the winner never came) goes back to the budget then.
    final class Share: Sendable {
        let budget: OutboundBudget
        private let held = Atomic<Int>(0)
        /// Called when a release may let peers held back run again: it took the budget below its
        /// limit, or it emptied this share while the budget is spent. It must not take the
        /// connection manager's lock synchronously (releases happen under it).
        private let wake: @Sendable () -> Void

        init(budget: OutboundBudget, wake: @escaping @Sendable () -> Void = {}) {
            self.budget = budget
            self.wake = wake
        }

        /// What the holder holds charged to the budget now.
        var bytes: Int { held.load(ordering: .relaxed) }

        /// The holder kept `cost` more.
        func added(_ cost: Int) {
            guard cost > 0 else { return }
            held.wrappingAdd(cost, ordering: .relaxed)
            budget.added(cost)
        }

        /// The holder let go of `cost` of what it held (acknowledged, moved on, dropped or ended).
        func removed(_ cost: Int) {
            guard cost > 0 else { return }
            let left = held.wrappingSubtract(cost, ordering: .relaxed).newValue
            let crossedBelow = budget.removed(cost)
            if crossedBelow || (left == 0 && budget.isSpent) { wake() }
        }

        deinit {
            let left = held.load(ordering: .relaxed)
            if left > 0, budget.removed(left) { wake() }
        }
    }
}
