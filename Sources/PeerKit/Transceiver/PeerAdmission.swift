/// The admission hook of ``PeerConfiguration/admission``: called once per connection whose
/// handshake succeeded, with the peer as it introduced itself; return `true` to admit it.
///
/// The hook runs before the peer is reported connected and before any of its messages is
/// delivered; messages that arrive while it runs wait. A peer refused is disconnected and not
/// redialled until it is discovered again. Answer within the handshake timeout: a hook that takes
/// longer counts as a refusal.
public typealias PeerAdmission = @Sendable (Peer) async -> Bool
