import NIOCore

/// Which of two connections between the same pair of peers survives.
///
/// Both peers may dial each other at once. Each side applies the same rule, so both keep the
/// same connection without talking about it: keep the connection dialled by the peer whose
/// `peerID` is smaller, byte-wise. Two connections dialled by the same side keep the older one.
///
/// Unless the existing connection is presumed lost (``presumedLost(quiet:establishedAt:now:heartbeatInterval:)``):
/// a peer dials only a peer it has no connection to, so a second connection is wanted on both
/// sides only when both dialled at once, and then both are new. A new connection beside one that
/// has gone quiet (nothing arrived on it for a heartbeat interval, although on a working link a
/// ping is answered well within one), or beside one established a heartbeat interval or more
/// before it, means that the side that dialled it lost the existing one (an address that changed,
/// a link that dropped, a heartbeat that timed out) and has only the new one. Keeping the new one
/// on both sides is what keeps them in agreement. Both sides see the same age: a connection's
/// handshake completes on its two ends within a round trip of each other.
///
/// Quiet alone is not enough: a link can fail one way only. A host whose address went away can
/// still send from it, so its pings reach the peer while nothing reaches it back; the peer's end
/// of the connection then stays loud until that host's heartbeat gives up, and the peer kept a
/// connection the host had already closed (on the simulated LAN, where the host then waited 5 s
/// for a winner that never came).
enum TieBreak {
    /// Who opened a connection, seen from this peer.
    enum Direction: Sendable, Hashable {
        /// We dialled.
        case outbound
        /// The peer dialled us.
        case inbound
    }

    /// Whether a newly established connection replaces the existing one; `existingPresumedLost`:
    /// see ``presumedLost(quiet:establishedAt:now:heartbeatInterval:)``.
    static func newConnectionWins(existing: Direction, new: Direction, localPeerID: String, remotePeerID: String, existingPresumedLost: Bool = false) -> Bool {
        if existingPresumedLost { return true }
        guard existing != new else { return false }
        let smallerDials: Direction = localPeerID.utf8.lexicographicallyPrecedes(remotePeerID.utf8) ? .outbound : .inbound
        return new == smallerDials
    }

    /// Whether an existing connection is presumed lost when a new one to the same peer completes
    /// its handshake at `now`: it has gone `quiet`, or it was established (`establishedAt`) a
    /// heartbeat interval or more before. A connection whose handshake time is unknown is not.
    static func presumedLost(quiet: Bool, establishedAt: NIODeadline?, now: NIODeadline, heartbeatInterval: TimeAmount) -> Bool {
        if quiet { return true }
        guard let establishedAt else { return false }
        return now - establishedAt >= heartbeatInterval
    }
}
