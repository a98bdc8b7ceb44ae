import NIOCore

/// What the connection manager reports to the layer above, in the order it happened.
enum ConnectionEvent: Sendable {
    /// A peer event: added, removed, connected, disconnected, list changed, or an error.
    case peer(PeerEvent)
    /// A connection completed its handshake and its peer was admitted. Reported for every such
    /// connection, also for a second one to a peer already connected (one of the two is retired
    /// by the tie-break soon after), so that the layer above can greet each one.
    case established(PeerConnection)
    /// A control frame of a feature the layer above handles (``EnvelopeType/passedUp``), from a
    /// peer that is connected. Ordered with the peer's other events: after its
    /// ``PeerEvent/peerConnected(_:)``, before its ``PeerEvent/peerDisconnected(_:reason:)``.
    case control(Envelope, from: Peer, on: PeerConnection)
    /// The peer ended its side of its resumable session while this side kept it, and the session
    /// started again on its connection (feature resume): requests waiting on it fail with
    /// `reason`, which is also published as an error. The peer stays connected.
    case sessionRestarted(Peer, reason: PeerKitError)
}

/// Receives the connection manager's events.
///
/// ``handle(_:)`` is called in the order the state changed, one call at a time, never with the
/// manager's lock held. It may not block: update state, hand the value on, and return.
protocol ConnectionManagerDelegate: AnyObject, Sendable {
    func handle(_ event: ConnectionEvent)
}

/// Where the connection manager hands application messages and replies (the messaging layer's
/// dispatcher). Called on the connection's event loop; it may not block.
protocol InboundMessageSink: AnyObject, Sendable {
    /// Messages (or replies) arrived from `sender` on `connection`, in this order.
    func enqueue(_ envelopes: ArraySlice<Envelope>, from sender: Peer, on connection: PeerConnection)
    /// A connection's outbox drained below its limit: handlers held back for a peer that was
    /// not reading may run again.
    func outboxHasRoom()
}

extension InboundMessageSink {
    /// A message (or a reply) arrived from `sender` on `connection`.
    func enqueue(_ envelope: Envelope, from sender: Peer, on connection: PeerConnection) {
        enqueue([envelope][...], from: sender, on: connection)
    }
}

/// Where the connection manager hands the `resources` feature's frames (the messaging layer's
/// resource transfers). Called on the connection's event loop; it may not block.
protocol ResourceFrameSink: AnyObject, Sendable {
    /// A `peerkit.resource.*` control frame arrived from `peer` on `connection`.
    func received(_ envelope: Envelope, from peer: Peer, on connection: PeerConnection)
    /// A binary resource chunk arrived from `peer` on `connection`.
    func received(_ chunk: ResourceChunk, from peer: Peer, on connection: PeerConnection)
}

/// Where the messaging layer's dispatcher sends answers, and asks whether a peer can take more
/// (the ``ConnectionManager``).
protocol PeerOutbound: AnyObject, Sendable {
    /// Queues `frame` for `peerID` on whichever connection is its own now, without waiting.
    /// Returns false when the peer is not connected (the frame is dropped).
    func sendWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool
    /// Whether the peer's outbox has room for what its handlers make.
    func outboxState(of peerID: String) -> OutboxState
}

/// What a peer's outbox can take now (``PeerOutbound/outboxState(of:)``).
enum OutboxState: Sendable, Equatable {
    /// Below ``PeerConfiguration/maximumQueuedOutboundBytes`` (and empty, while the
    /// transceiver's ``OutboundBudget`` is spent).
    case room
    /// At or over it (or not empty under a spent budget): the peer is not reading what was made
    /// for it, or not yet.
    case full
    /// The peer is not connected.
    case disconnected
}
