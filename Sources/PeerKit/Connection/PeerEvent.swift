/// Something that happened to a transceiver, delivered in order through
/// ``PeerTransceiver/events()``.
public enum PeerEvent: Sendable, Hashable {
    /// The transceiver listens on `port` (0 when it does not listen). It is the first event of a
    /// run: discovery starts right after it (and before ``PeerTransceiver/start()`` returns), so
    /// a discovery failure, such as avahi-daemon being out of reach, always comes after it.
    case started(port: Int)
    /// A peer became available (discovered, or connected to us without being discovered).
    case peerAdded(Peer)
    /// A peer is no longer available.
    case peerRemoved(Peer)
    /// A connection to a peer completed its handshake; messages can be sent to it.
    case peerConnected(Peer)
    /// The connection to a peer ended; `reason` says why when it did not end gracefully.
    case peerDisconnected(Peer, reason: PeerKitError?)
    /// The link to a peer with a resumable session dropped (`reason` says how): it stays
    /// connected for ``PeerConfiguration/sessionResumeWindow`` while it is redialled, and what is
    /// sent to it waits (feature `resume`). Followed by ``peerResumed(_:)`` when it comes back in
    /// time, or by ``peerDisconnected(_:reason:)`` with ``PeerKitError/sessionExpired(peer:window:)``.
    case peerSuspended(Peer, reason: PeerKitError?)
    /// A suspended peer is back on a new connection, with its session: what it did not receive
    /// is sent again, once, in order, before anything new.
    case peerResumed(Peer)
    /// A connected peer joined `group` (or was in it when it connected). Only peers whose hello
    /// lists the `groups` feature are ever members.
    case peerJoinedGroup(Peer, group: String)
    /// A peer left `group`, or disconnected while in it (then before its
    /// ``peerDisconnected(_:reason:)``).
    case peerLeftGroup(Peer, group: String)
    /// The list of available peers changed.
    case availablePeersChanged([Peer])
    /// Discovery has reported every peer it already knew of when the transceiver started
    /// (``DiscoveryEvent/knownServicesListed``): ``PeerTransceiver/availablePeers`` holds them now,
    /// though their connections may still be under way. Sent at most once per start; peers that
    /// answer later are still added. ``PeerTransceiver/knownPeersListed`` tells whether it was sent.
    case knownPeersListed
    /// Something went wrong that the transceiver could not hide (discovery failed, a peer
    /// misbehaved, a message could not be handled). The transceiver keeps running. A security
    /// refusal of an incoming connection (``PeerKitError/isSecurityRefusal``) is published once
    /// per remote host per episode, as it is logged, not once per connection.
    case error(PeerKitError)
    /// The transceiver stopped.
    case stopped
}
