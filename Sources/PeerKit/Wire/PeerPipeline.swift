import NIOCore

/// The channel pipeline of every peer connection, the same for the listener's child channels
/// and for dialled channels: frame decoding with its limit, then the connection handler.
enum PeerPipeline {
    /// Adds the frame decoder (whose limit follows `limit`) and `handler` to `channel`. Call on the
    /// channel's event loop.
    static func configure(_ channel: any Channel, limit: FrameLengthLimit, handler: some ChannelHandler) throws {
        let decoder = ByteToMessageHandler(FrameDecoder(limit: limit))
        try channel.pipeline.syncOperations.addHandler(decoder)
        try channel.pipeline.syncOperations.addHandler(handler)
    }

    /// Adds a frame decoder with a fixed limit and `handler` to `channel`.
    static func configure(_ channel: any Channel, maximumFrameLength: Int, handler: some ChannelHandler) throws {
        try configure(channel, limit: FrameLengthLimit(maximumFrameLength), handler: handler)
    }
}
