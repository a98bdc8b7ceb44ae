import NIOCore

/// The channel pipeline of every peer connection, the same for the listener's child channels
/// and for dialled channels: the security handlers (mode sniffer, TLS), then frame decoding with
/// its limit, then the connection handler.
enum PeerPipeline {
    /// Adds the security handlers, the frame decoder (whose limit follows `limit`) and `handler`
    /// to `channel`. Call on the channel's event loop. `firstBytesTimeout`: how long the peer may
    /// take to send its first bytes, before the handshake proper (nil: only the handshake timeout
    /// applies); accepted connections have one (``PeerConfiguration/preHandshakeTimeout``).
    static func configure(_ channel: any Channel, security: WireSecurity = .plaintext, inbound: Bool = true, firstBytesTimeout: (timeout: TimeAmount, clock: PeerClock)? = nil, limit: FrameLengthLimit, handler: some ChannelHandler) throws {
        try security.addHandlers(to: channel, inbound: inbound, firstBytesTimeout: firstBytesTimeout)
        try channel.pipeline.syncOperations.addHandler(FrameReader(FrameDecoder(limit: limit)))
        try channel.pipeline.syncOperations.addHandler(handler)
    }

    /// Adds a frame decoder with a fixed limit and `handler` to `channel`.
    static func configure(_ channel: any Channel, maximumFrameLength: Int, handler: some ChannelHandler) throws {
        try configure(channel, limit: FrameLengthLimit(maximumFrameLength), handler: handler)
    }
}
