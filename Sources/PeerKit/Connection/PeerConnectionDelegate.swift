/// What a connection tells the layer that owns it. Called on the connection's event loop;
/// implementations must not block.
protocol PeerConnectionDelegate: AnyObject, Sendable {
    /// The handshake completed.
    func connectionEstablished(_ connection: PeerConnection, remote: Hello)
    /// The peer's advertised name changed.
    func connectionRenamed(_ connection: PeerConnection, remote: Hello)
    /// An application message or a reply arrived.
    func connection(_ connection: PeerConnection, received envelope: Envelope)
    /// A binary resource chunk arrived (the `resources` feature was negotiated).
    func connection(_ connection: PeerConnection, received chunk: ResourceChunk)
    /// The connection ended, for `reason`; called exactly once, as soon as the connection's state
    /// machine decided it (the socket may linger a moment so the peer can read a last frame).
    func connectionClosed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason)
}
