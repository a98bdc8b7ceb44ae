import NIOCore

/// One piece of a resource's bytes, as it travels in a binary chunk frame.
struct ResourceChunk: Sendable, Equatable {
    /// The transfer it belongs to, as numbered by the sender in its `peerkit.resource.offer`.
    var transfer: UInt32
    /// The bytes, a slice of the frame (no copy).
    var data: ByteBuffer
}

/// The binary frame of the `resources` feature: a frame whose body starts with the byte `0x00`
/// (a JSON envelope starts with `{` or whitespace, so the two never mix up).
///
///     +---------------------+-------------+--------------------------+------------------+
///     | length N (UInt32 BE) | 0x00 (kind) | transfer ID (UInt32 BE)  | N - 5 data bytes |
///     +---------------------+-------------+--------------------------+------------------+
///
/// The data bytes go on the wire as they are: no Base64, no JSON. Only peers whose hellos both
/// list the `resources` feature send or accept such frames; any other peer treats one as a
/// malformed frame.
enum ResourceChunkFrame {
    /// The first body byte of a binary chunk frame.
    static let kind: UInt8 = 0x00
    /// The kind byte and the transfer ID.
    static let headerLength = 5

    /// Whether `frame` (a frame body, without its length field) is a binary chunk frame.
    static func isChunk(_ frame: ByteBuffer) -> Bool {
        frame.getInteger(at: frame.readerIndex, as: UInt8.self) == kind
    }

    /// The whole frame, length field included, for `data` of `transfer`.
    static func encode(transfer: UInt32, data: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var frame = head(transfer: transfer, dataLength: data.readableBytes, allocator: allocator)
        frame.writeImmutableBuffer(data)
        return frame
    }

    /// The frame's first nine bytes (length field, kind and transfer ID) for `dataLength` data
    /// bytes of `transfer`: the data follows it on the wire as it is, so it need not be copied.
    static func head(transfer: UInt32, dataLength: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var head = allocator.buffer(capacity: 4 + headerLength)
        head.writeInteger(UInt32(headerLength + dataLength))
        head.writeInteger(kind)
        head.writeInteger(transfer)
        return head
    }

    /// Reads a chunk from a frame body that ``isChunk(_:)``.
    static func decode(_ frame: ByteBuffer) throws(WireError) -> ResourceChunk {
        var frame = frame
        guard frame.readInteger(as: UInt8.self) == kind, let transfer = frame.readInteger(as: UInt32.self) else {
            throw .malformedEnvelope("a binary chunk frame is shorter than its 5-byte header")
        }
        return ResourceChunk(transfer: transfer, data: frame)
    }
}
