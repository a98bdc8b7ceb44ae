/// What a connection tells the layer that owns it. Called on the connection's event loop;
/// implementations must not block.
protocol PeerConnectionDelegate: AnyObject, Sendable {
    /// The handshake completed.
    func connectionEstablished(_ connection: PeerConnection, remote: Hello)
    /// An application message or a reply arrived.
    func connection(_ connection: PeerConnection, received envelope: Envelope)
    /// The peer reported a connection-level error.
    func connection(_ connection: PeerConnection, reported error: PeerKitError)
    /// The connection closed; `error` says why when it was not a graceful close.
    func connectionClosed(_ connection: PeerConnection, error: PeerKitError?, byeReason: String?)
}
