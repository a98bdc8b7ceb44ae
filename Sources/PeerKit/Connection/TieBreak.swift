/// Which of two connections between the same pair of peers survives.
///
/// Both peers may dial each other at once. Each side applies the same rule, so both keep the
/// same connection without talking about it: keep the connection dialled by the peer whose
/// `peerID` is smaller, byte-wise. Two connections dialled by the same side keep the older one.
enum TieBreak {
    /// Who opened a connection, seen from this peer.
    enum Direction: Sendable, Hashable {
        /// We dialled.
        case outbound
        /// The peer dialled us.
        case inbound
    }

    /// Whether a newly established connection replaces the existing one.
    static func newConnectionWins(existing: Direction, new: Direction, localPeerID: String, remotePeerID: String) -> Bool {
        guard existing != new else { return false }
        let smallerDials: Direction = localPeerID.utf8.lexicographicallyPrecedes(remotePeerID.utf8) ? .outbound : .inbound
        return new == smallerDials
    }
}
