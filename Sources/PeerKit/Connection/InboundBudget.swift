import NIOConcurrencyHelpers

/// What all of a transceiver's connections together may have accepted and not yet handled:
/// ``PeerConfiguration/maximumTotalQueuedInboundBytes``, on top of each connection's own
/// ``PeerConfiguration/maximumQueuedInboundBytes``.
///
/// Each connection's limit bounds one peer; this bounds them all, whatever the number of
/// connections: a message counts from the end of the read that brought it to the end of its handler
/// (or until it is dropped). Over the budget, the connection whose message went over stops reading;
/// every connection paused so resumes once the total is down to half the budget. A message that is
/// the only one its connection has waiting never pauses it: peers that hold the budget (their
/// handlers held back, say, because they do not read their answers) cannot lock out a peer that
/// sends one request and waits for its answer. So an attacker who opens many connections, each
/// within its own limit, makes the process hold at most this much plus, per connection, the
/// messages of the read that went over (a connection takes them in together), and is paused itself.
final class InboundBudget: Sendable {
    /// The budget in bytes.
    let limit: Int

    private struct State {
        var total = 0
        /// Connections that stopped reading because the budget was spent.
        var paused: [ObjectIdentifier: PeerConnection] = [:]
    }

    private let state = NIOLockedValueBox(State())

    init(limit: Int) {
        self.limit = limit
    }

    /// Bytes accepted and not yet handled, over all connections.
    var total: Int { state.withLockedValue { $0.total } }

    /// `connection` accepted a message of `cost` bytes, `alone` when nothing else of it waits.
    /// Returns true when the budget is now spent and the message is not alone: `connection` must
    /// stop reading, and is resumed by ``handled(_:)``. A connection's only message does not
    /// pause it, so that the budget held by others never stops a peer that waits for each answer.
    func accepted(_ cost: Int, by connection: PeerConnection, alone: Bool = false) -> Bool {
        state.withLockedValue { state in
            state.total += cost
            guard state.total > limit, !alone else { return false }
            state.paused[ObjectIdentifier(connection)] = connection
            return true
        }
    }

    /// A message of `cost` bytes was handled (or dropped). Returns the connections to resume
    /// (once the total is down to half the budget), for the caller to resume without the lock.
    func handled(_ cost: Int) -> [PeerConnection] {
        state.withLockedValue { state in
            state.total -= cost
            guard !state.paused.isEmpty, state.total <= limit / 2 else { return [] }
            defer { state.paused = [:] }
            return Array(state.paused.values)
        }
    }

    /// `connection` ended: it is no longer waiting to be resumed.
    func forget(_ connection: PeerConnection) {
        _ = state.withLockedValue { $0.paused.removeValue(forKey: ObjectIdentifier(connection)) }
    }
}
