import NIOConcurrencyHelpers
import NIOCore

/// The group membership of one transceiver (for its whole life, across restarts) and the
/// connections it tells about it: keeps a ``GroupMembership`` behind a lock and sends
/// `peerkit.groups` snapshots.
///
/// Every connection to a peer that speaks the `groups` feature is greeted with the current
/// snapshot once the connection manager reports it established, and is sent a new one with every
/// change until it closes. The frames are sent after the lock is released (nothing is called
/// while holding it), so two changes at once may reach a connection out of order; a peer ignores
/// a snapshot whose version is not newer than the last it applied (Protocol.md), so what it knows
/// is the newest membership either way.
final class GroupDirectory: Sendable {
    private struct State {
        var membership: GroupMembership
        /// Open connections greeted with a snapshot, which get every later one.
        var greeted: [ObjectIdentifier: PeerConnection] = [:]
    }

    private let state: NIOLockedValueBox<State>

    init(limits: GroupMembership.Limits) {
        state = NIOLockedValueBox(State(membership: GroupMembership(limits: limits)))
    }

    // MARK: This side

    /// Joins `group` and tells every greeted connection. Joining a group twice does nothing.
    func join(_ group: String) throws(PeerKitError) {
        let result = state.withLockedValue { state -> Result<Announcement?, GroupMembership.Violation> in
            do throws(GroupMembership.Violation) {
                return .success(try state.membership.join(group) ? Self.announcement(state) : nil)
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case let .success(announcement):
            announcement?.send()
        case let .failure(violation):
            throw .invalidGroup(group, reason: violation.reason)
        }
    }

    /// Leaves `group` and tells every greeted connection. Leaving a group not joined does nothing.
    func leave(_ group: String) {
        let announcement = state.withLockedValue { state in
            state.membership.leave(group) ? Self.announcement(state) : nil
        }
        announcement?.send()
    }

    /// This side's groups, sorted.
    var groups: [String] {
        state.withLockedValue { $0.membership.local.sorted() }
    }

    /// Whether this side is in `group`.
    func isMember(_ group: String) -> Bool {
        state.withLockedValue { $0.membership.local.contains(group) }
    }

    /// Checks `group` as a name this side could join or send to.
    func validate(_ group: String) throws(PeerKitError) {
        let limits = state.withLockedValue { $0.membership.limits }
        if let problem = GroupMembership.problem(withName: group, limits: limits) {
            throw .invalidGroup(group, reason: "its name \(problem)")
        }
    }

    /// A snapshot and the connections to send it to, taken under the lock and sent after it.
    private struct Announcement {
        let frame: ByteBuffer
        let connections: [PeerConnection]

        func send() {
            for connection in connections { connection.send(frame) }
        }
    }

    private static func announcement(_ state: State) -> Announcement? {
        guard !state.greeted.isEmpty else { return nil }
        return Announcement(frame: Self.frame(state.membership.snapshot), connections: Array(state.greeted.values))
    }

    private static func frame(_ snapshot: GroupSnapshot) -> ByteBuffer {
        MessageCodec.encodeControl(type: EnvelopeType.groups, snapshot).frame()
    }

    // MARK: Connections and peers

    /// A connection completed its handshake and was admitted: when its peer speaks `groups`,
    /// send it our snapshot now and every later one until it closes.
    func greet(_ connection: PeerConnection) {
        guard connection.supports(Hello.Feature.groups) else { return }
        let id = ObjectIdentifier(connection)
        let frame = state.withLockedValue { state in
            state.greeted[id] = connection
            return Self.frame(state.membership.snapshot)
        }
        connection.send(frame)
        connection.channel.closeFuture.whenComplete { _ in
            self.state.withLockedValue { _ = $0.greeted.removeValue(forKey: id) }
        }
    }

    /// Applies a `peerkit.groups` frame from `peer` and returns the events it makes, in order.
    /// - Throws: why the peer must be disconnected: a payload that is not a snapshot, or a
    ///   snapshot over a limit.
    func received(_ envelope: Envelope, from peer: Peer) throws(ConnectionStateMachine.Failure) -> [PeerEvent] {
        let snapshot: GroupSnapshot
        do {
            snapshot = try envelope.decodePayload(GroupSnapshot.self)
        } catch {
            throw .malformed("a peerkit.groups payload is not {\"version\":N,\"groups\":[…]}")
        }
        let result = state.withLockedValue { state -> Result<[GroupMembership.Change], GroupMembership.Violation> in
            do throws(GroupMembership.Violation) {
                return .success(try state.membership.apply(snapshot, from: peer.id))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case let .success(changes):
            return changes.map { Self.event($0, peer: peer) }
        case let .failure(violation):
            throw violation.isLimit ? .limitExceeded(violation.reason) : .malformed(violation.reason)
        }
    }

    /// Forgets the membership of a peer that disconnected and returns the events: it left each
    /// of its groups.
    func peerDisconnected(_ peer: Peer) -> [PeerEvent] {
        state.withLockedValue { $0.membership.peerDisconnected(peer.id) }.map { Self.event($0, peer: peer) }
    }

    /// Forgets every peer's membership and every greeted connection: the session stopped. (Its
    /// peers' disconnections normally did that already, one by one, with events.)
    func sessionStopped() {
        state.withLockedValue { state in
            state.membership.forgetPeers()
            state.greeted = [:]
        }
    }

    /// The IDs of the connected peers in `group`.
    func memberIDs(of group: String) -> Set<String> {
        state.withLockedValue { $0.membership.members(of: group) }
    }

    private static func event(_ change: GroupMembership.Change, peer: Peer) -> PeerEvent {
        switch change {
        case let .joined(_, group): return .peerJoinedGroup(peer, group: group)
        case let .left(_, group): return .peerLeftGroup(peer, group: group)
        }
    }
}
