import NIOCore

/// What ``FrameDecoder`` passes up the pipeline.
enum InboundFrame: Equatable, Sendable {
    /// A whole frame body, without its length field: a JSON envelope, or a binary frame too
    /// short to hold a chunk header (which the connection refuses).
    case frame(ByteBuffer)
    /// The whole bodies of several frames that one read completed, in order (at most
    /// ``FrameDecoder/maximumFramesTogether``): one trip up the pipeline for a burst of small
    /// messages instead of one each. Only once the frame limit is
    /// final (``FrameLengthLimit/isFinal``): before, each frame goes up alone, as the hello in it
    /// sets the limit of the frames behind it.
    case frames([ByteBuffer])
    /// A piece of a binary chunk frame's data, passed on as soon as it was read, so the data of
    /// a chunk is never gathered into one buffer. The pieces of one frame arrive in order and
    /// add up to its data; `framingBytes` is 9 (length field, kind and transfer ID) on a frame's
    /// first piece and 0 on the others, so that counting wire bytes stays exact.
    case chunk(ResourceChunk, framingBytes: Int)
}
