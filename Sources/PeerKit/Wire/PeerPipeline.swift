import NIOCore

/// The channel pipeline of every peer connection, the same for the listener's child channels
/// and for dialled channels: frame decoding with its limit, then the connection handler.
enum PeerPipeline {
    /// Adds the frame decoder and `handler` to `channel`. Call on the channel's event loop.
    static func configure(_ channel: any Channel, maximumFrameLength: Int, handler: some ChannelHandler) throws {
        let decoder = ByteToMessageHandler(FrameDecoder(maximumFrameLength: maximumFrameLength))
        try channel.pipeline.syncOperations.addHandler(decoder)
        try channel.pipeline.syncOperations.addHandler(handler)
    }
}
