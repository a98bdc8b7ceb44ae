extension PeerEvent: CustomStringConvertible {
    /// The event as a short sentence for logs and terminals, for example
    /// `connected to peer "Kitchen" (4F1C…)` or `disconnected from peer "Kitchen" (4F1C…): the peer stopped answering`.
    public var description: String {
        switch self {
        case let .started(port) where port == 0:
            return "started (not listening)"
        case let .started(port):
            return "started, listening on port \(port)"
        case let .peerAdded(peer):
            return "found \(peer)\(Self.info(peer))"
        case let .peerRemoved(peer):
            return "lost \(peer)"
        case let .peerConnected(peer):
            return "connected to \(peer)"
        case let .peerDisconnected(peer, reason: nil):
            return "disconnected from \(peer)"
        case let .peerDisconnected(peer, reason: reason?):
            return "disconnected from \(peer): \(reason)"
        case let .peerSuspended(peer, reason: nil):
            return "lost the link to \(peer); its session is kept"
        case let .peerSuspended(peer, reason: reason?):
            return "lost the link to \(peer); its session is kept: \(reason)"
        case let .peerResumed(peer):
            return "resumed the session with \(peer)"
        case let .peerJoinedGroup(peer, group):
            return "\(peer) joined group \"\(LogSafe.text(group, maximumBytes: 80))\""
        case let .peerLeftGroup(peer, group):
            return "\(peer) left group \"\(LogSafe.text(group, maximumBytes: 80))\""
        case let .availablePeersChanged(peers) where peers.isEmpty:
            return "no peers available"
        case let .availablePeersChanged(peers):
            return "\(peers.count) peer\(peers.count == 1 ? "" : "s") available: \(peers.map { "\"\($0.name)\"" }.joined(separator: ", "))"
        case .knownPeersListed:
            return "discovery listed the peers it knew of"
        case let .error(error):
            return "error: \(error)"
        case .stopped:
            return "stopped"
        }
    }

    private static func info(_ peer: Peer) -> String {
        guard !peer.discoveryInfo.isEmpty else { return "" }
        return " with " + peer.discoveryInfo.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
}
