/// What a connection tells the layer that owns it. Called on the connection's event loop;
/// implementations must not block.
protocol PeerConnectionDelegate: AnyObject, Sendable {
    /// The handshake completed.
    func connectionEstablished(_ connection: PeerConnection, remote: Hello)
    /// The peer's advertised name changed.
    func connectionRenamed(_ connection: PeerConnection, remote: Hello)
    /// Application messages, replies or the protocol's frames arrived, in the order they were
    /// read: one call per read from the socket, not one per message.
    func connection(_ connection: PeerConnection, received envelopes: [Envelope])
    /// A binary resource chunk arrived (the `resources` feature was negotiated).
    func connection(_ connection: PeerConnection, received chunk: ResourceChunk)
    /// The connection ended, for `reason`; called exactly once, as soon as the connection's state
    /// machine decided it (the socket may linger a moment so the peer can read a last frame).
    func connectionClosed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason)
}
