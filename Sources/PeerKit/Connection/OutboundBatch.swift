import NIOCore

/// The small frames one drain of an outbox writes, gathered into one buffer: one write through
/// the channel's pipeline (and, with TLS, one record) for a burst of small messages instead of
/// one per frame, which cost more than copying their bytes
/// (``PeerConnection/drain(everything:)``).
///
///     add(a) → nil       a waits, uncopied
///     add(b) → nil       a and b are copied into one buffer
///     add(c) → nil       c is appended
///     take() → a b c     written as one
///
/// A frame that comes alone is written as it is, with no copy, so that a request, a reply or a
/// ping costs what it did. A frame over ``maximumFrameBytes`` is never gathered: the caller
/// takes the batch, writes it, and then writes that frame as it is, so that large payloads are
/// never copied. The gathered buffer holds at most ``capacity`` bytes; ``add(_:remainingBytes:allocator:)``
/// hands back a full one to write before it starts the next. A value type with no I/O.
struct OutboundBatch {
    /// Frames up to this size are gathered; larger ones are written as they are.
    static let maximumFrameBytes = 2048
    /// The most bytes one gathered buffer holds, so that a drain's copy stays small, and the
    /// writes of one drain go past the channel's high-water mark by at most this much.
    static let capacity = 1 << 16

    /// The first frame, while it is the only one: not copied yet.
    private var first: ByteBuffer?
    /// The frames gathered so far, once there were two.
    private var gathered: ByteBuffer?

    init() {}

    /// Whether `frame` may be gathered (else the caller writes the batch, then the frame).
    static func gathers(_ frame: ByteBuffer) -> Bool {
        frame.readableBytes <= maximumFrameBytes
    }

    /// Adds `frame` (one that ``gathers(_:)``). Returns a full batch to write before it, if any.
    /// `remainingBytes`: what else is likely to follow in this drain (the bytes still queued),
    /// which sizes the buffer so that it is not grown frame by frame.
    mutating func add(_ frame: ByteBuffer, remainingBytes: Int, allocator: ByteBufferAllocator) -> ByteBuffer? {
        if var batch = gathered {
            guard batch.readableBytes + frame.readableBytes <= Self.capacity else {
                gathered = nil
                first = frame
                return batch
            }
            gathered = nil  // uniquely referenced while written to: appended in place
            batch.writeImmutableBuffer(frame)
            gathered = batch
            return nil
        }
        guard let alone = first else {
            first = frame
            return nil
        }
        let size = alone.readableBytes + frame.readableBytes
        var batch = allocator.buffer(capacity: min(Self.capacity, size + max(0, remainingBytes)))
        batch.writeImmutableBuffer(alone)
        batch.writeImmutableBuffer(frame)
        first = nil
        gathered = batch
        return nil
    }

    /// What was added and not yet handed back: the gathered buffer, or the one frame as it is.
    mutating func take() -> ByteBuffer? {
        defer {
            first = nil
            gathered = nil
        }
        return gathered ?? first
    }
}
