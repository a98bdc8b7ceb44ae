/// What the connection manager reports to the layer above.
///
/// `emit` is called in the order the state changed, one call at a time, never with the manager's
/// lock held; `received` is called on the connection's event loop. Neither may block: hand the
/// value on (yield it to a stream) and return.
protocol ConnectionManagerDelegate: AnyObject, Sendable {
    /// A peer event: added, removed, connected, disconnected, list changed, or an error.
    func emit(_ event: PeerEvent)
    /// A message (or a reply) arrived from `peer` on `connection`.
    func received(_ envelope: Envelope, from peer: Peer, on connection: PeerConnection)
    /// A resource chunk arrived from `peer` on `connection`; called on the connection's event loop.
    func received(_ chunk: ResourceChunk, from peer: Peer, on connection: PeerConnection)
}
