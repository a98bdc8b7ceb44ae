import NIOCore

/// Where a connection manager gets its channels when they are not TCP sockets: the seam that
/// `PeerKitTesting`'s `TestNetwork` plugs into (``PeerConfiguration/transport``).
///
/// Only the channels are replaced. Whatever a transport hands over gets the same pipeline as a
/// TCP connection (security handlers, frame decoder with its limits, the connection handler and
/// its state machine), from the same code in ``ConnectionManager``; so handshake, framing,
/// heartbeats, back-pressure and closing are the real ones. The seam is `package`-level: it is
/// not public API, and only the targets of this package (the test kit) can implement it.
package protocol PeerTransport: Sendable {
    /// Starts accepting connections for one transceiver. `configure` sets up an accepted
    /// channel's pipeline; call it on the channel's event loop before the channel is active
    /// (as a server bootstrap's child initializer is called). Returns the listener.
    func listen(group: any EventLoopGroup, configure: @escaping @Sendable (any Channel) throws -> Void) async throws -> any PeerTransportListener

    /// Opens a connection to `endpoint` (an endpoint that discovery reported), calling
    /// `configure` on the new channel's event loop before it is active. The future fails, with
    /// an error whose description says why, when the endpoint cannot be reached.
    func connect(to endpoint: PeerEndpoint, group: any EventLoopGroup, configure: @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<Void>
}

/// A transport's listener: what a server channel is for TCP.
package protocol PeerTransportListener: Sendable {
    /// The port advertised for this listener.
    var port: Int { get }
    /// Stops accepting; the future completes once no connection will be accepted any more.
    func close() -> EventLoopFuture<Void>
}

/// An error a ``PeerTransport``'s connect can fail with that says whether the endpoint refused the
/// connection as TCP's `ECONNREFUSED` does: the host is there, and nothing listens at that port.
/// A suspended peer whose every endpoint refuses is taken to have ended (``DialPlan/everyEndpointRefused``),
/// so a transport that models a crash says so with this.
package protocol PeerTransportConnectError: Error {
    /// Whether nothing listens at the endpoint.
    var isConnectionRefused: Bool { get }
}
