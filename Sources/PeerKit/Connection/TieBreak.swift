/// Which of two connections between the same pair of peers survives.
///
/// Both peers may dial each other at once. Each side applies the same rule, so both keep the
/// same connection without talking about it: keep the connection dialled by the peer whose
/// `peerID` is smaller, byte-wise. Two connections dialled by the same side keep the older one.
///
/// Unless the existing connection has gone quiet: nothing arrived on it for a heartbeat interval,
/// although on a working link a ping is answered well within one. A peer dials only a peer it has
/// no connection to, so a new connection from it while ours is quiet means that it lost ours (an
/// address that changed, a link that dropped) and has not heard of it since; ours would be closed
/// by the heartbeat a moment later anyway. Keeping the new one then is what the peer does too (it
/// has only that one), and it saves the seconds until our heartbeat notices, then a redial. Two
/// connections dialled at the same moment are both just handshaken, so neither is quiet then.
enum TieBreak {
    /// Who opened a connection, seen from this peer.
    enum Direction: Sendable, Hashable {
        /// We dialled.
        case outbound
        /// The peer dialled us.
        case inbound
    }

    /// Whether a newly established connection replaces the existing one; `existingIsQuiet`:
    /// nothing arrived on the existing one for a heartbeat interval.
    static func newConnectionWins(existing: Direction, new: Direction, localPeerID: String, remotePeerID: String, existingIsQuiet: Bool = false) -> Bool {
        if existingIsQuiet { return true }
        guard existing != new else { return false }
        let smallerDials: Direction = localPeerID.utf8.lexicographicallyPrecedes(remotePeerID.utf8) ? .outbound : .inbound
        return new == smallerDials
    }
}
