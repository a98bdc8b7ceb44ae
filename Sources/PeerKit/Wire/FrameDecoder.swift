import NIOCore

/// Splits the inbound byte stream into frames, refuses an oversized frame before buffering it,
/// and passes the data of binary chunk frames on as it arrives. ``FrameReader`` runs it in the
/// pipeline; it is a `ByteToMessageDecoder`, so NIO's tests of decoders check it too.
///
///     +---------------------+------------------------------+
///     | length N (UInt32 BE) | N bytes: UTF-8 JSON envelope |
///     +---------------------+------------------------------+
///
/// A frame above `maximumFrameLength` throws ``WireError/frameTooLarge(length:limit:)`` while only
/// its four length bytes have been read. The limit can change while the connection runs: it
/// starts at the small pre-handshake limit and the connection handler raises it once the
/// handshake completed (``FrameLengthLimit``).
///
/// **Envelopes** are gathered whole and passed on as ``InboundFrame/frame(_:)``; once the limit
/// is final, the whole envelopes one read completed go up together as ``InboundFrame/frames(_:)``,
/// up to ``maximumFramesTogether`` at a time.
///
/// **Binary chunk frames** (``ResourceChunkFrame``) are not gathered (which is why this decoder
/// splits frames itself: NIOExtras' `LengthFieldBasedFrameDecoder` hands on whole frames only).
/// Once the 5-byte header is read, every read's share of the frame's data goes up at once as
/// ``InboundFrame/chunk(_:framingBytes:)``, a slice of the buffer the socket was read into.
/// Gathering a 256 KiB chunk from 64 KiB reads copied every byte of a resource once more and, as
/// the reading handler compacted its buffer while the chunks before were still held,
/// reallocated it; passing pieces on leaves that buffer empty after each read, so the next read
/// is taken as it is. A piece that would keep a read buffer more than twice its size alive (a
/// short tail of a chunk, a trickling sender) is copied into a buffer of its own, so the memory a
/// resource's window holds stays within twice its bytes.
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = InboundFrame

    /// The longest body accepted now, in bytes.
    var maximumFrameLength: Int { limit.current }

    private let limit: FrameLengthLimit
    private var expecting = Expecting.lengthField
    /// The bodies of the frames gathered by the current ``decode(context:buffer:)``; empty
    /// between calls, its storage kept for the next one.
    private var gathered: [ByteBuffer] = []

    /// The most frames passed up together. A read of tiny frames (a peer can send 16,384 empty
    /// ones in 64 KiB) then costs an array of at most this many, kept for the next read, and the
    /// rest of the read goes up in further batches.
    static let maximumFramesTogether = 256

    private enum Expecting: Equatable {
        /// The next four bytes are a length field.
        case lengthField
        /// A body of `length` bytes, not started.
        case body(length: Int)
        /// The rest of a chunk frame's data; `framingBytes` are the frame's header bytes not yet
        /// counted (9 until its first piece went up).
        case chunkData(transfer: UInt32, remaining: Int, framingBytes: Int)
    }

    /// A decoder whose limit follows `limit`.
    init(limit: FrameLengthLimit) {
        self.limit = limit
    }

    /// A decoder with a fixed limit.
    init(maximumFrameLength: Int) {
        self.init(limit: FrameLengthLimit(maximumFrameLength))
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let frame = try next(from: &buffer) else { return .needMoreData }
        guard limit.isFinal, case let .frame(body) = frame else {
            context.fireChannelRead(wrapInboundOut(frame))
            return .continue
        }
        // The whole frames behind it in this read go up with it. A chunk's piece, or an error,
        // goes up after them.
        var after: InboundFrame?
        do {
            while gathered.count < Self.maximumFramesTogether, let next = try next(from: &buffer) {
                guard case let .frame(another) = next else {
                    after = next
                    break
                }
                if gathered.isEmpty { gathered.append(body) }
                gathered.append(another)
            }
        } catch {
            fireGathered(first: body, context: context)
            throw error
        }
        fireGathered(first: body, context: context)
        if let after { context.fireChannelRead(wrapInboundOut(after)) }
        return .continue
    }

    /// Passes up `first` alone, or with the frames gathered behind it, and empties the gathering.
    private mutating func fireGathered(first: ByteBuffer, context: ChannelHandlerContext) {
        guard !gathered.isEmpty else {
            context.fireChannelRead(wrapInboundOut(.frame(first)))
            return
        }
        context.fireChannelRead(wrapInboundOut(.frames(gathered)))
        // The handler is done with the array: its storage is ours alone again, and is kept.
        gathered.removeAll(keepingCapacity: true)
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while case .continue = try decode(context: context, buffer: &buffer) {}
        if buffer.readableBytes > 0 || expecting != .lengthField {
            throw WireError.truncatedFrame(bytesLeft: buffer.readableBytes)
        }
        return .needMoreData
    }

    /// The next frame or piece in `buffer`, or nil when more bytes are needed (or the length
    /// field just read announced a body still to come).
    mutating func next(from buffer: inout ByteBuffer) throws(WireError) -> InboundFrame? {
        switch expecting {
        case .lengthField:
            guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
            let maximum = limit.current
            guard length <= maximum else {
                throw .frameTooLarge(length: Int(length), limit: maximum)
            }
            buffer.moveReaderIndex(forwardBy: 4)
            expecting = .body(length: Int(length))
            return try next(from: &buffer)

        case let .body(length):
            let header = ResourceChunkFrame.headerLength
            let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self)
            if length >= header, first == nil || first == ResourceChunkFrame.kind {
                // A chunk frame: wait for its header, then pass its data on piece by piece.
                guard buffer.readableBytes >= header, buffer.readInteger(as: UInt8.self) != nil,
                      let transfer = buffer.readInteger(as: UInt32.self) else { return nil }
                let remaining = length - header
                guard remaining > 0 else {
                    expecting = .lengthField
                    return .chunk(ResourceChunk(transfer: transfer, data: ByteBuffer()), framingBytes: 4 + header)
                }
                expecting = .chunkData(transfer: transfer, remaining: remaining, framingBytes: 4 + header)
                return piece(of: transfer, remaining: remaining, from: &buffer, framingBytes: 4 + header)
            }
            guard let body = buffer.readSlice(length: length) else { return nil }
            expecting = .lengthField
            return .frame(body)

        case let .chunkData(transfer, remaining, framingBytes):
            return piece(of: transfer, remaining: remaining, from: &buffer, framingBytes: framingBytes)
        }
    }

    /// Up to `remaining` bytes of a chunk frame's data from `buffer`, or nil when it is empty.
    private mutating func piece(of transfer: UInt32, remaining: Int, from buffer: inout ByteBuffer, framingBytes: Int) -> InboundFrame? {
        let count = min(remaining, buffer.readableBytes)
        let capacity = buffer.capacity
        guard count > 0, var data = buffer.readSlice(length: count) else { return nil }
        if count * 2 < capacity {
            // Do not keep a much larger read buffer alive for a few bytes.
            data = ByteBuffer(bytes: data.readableBytesView)
        }
        expecting = remaining == count ? .lengthField : .chunkData(transfer: transfer, remaining: remaining - count, framingBytes: 0)
        return .chunk(ResourceChunk(transfer: transfer, data: data), framingBytes: framingBytes)
    }
}

/// The frame limit of one connection, shared by its ``FrameDecoder`` and its
/// ``PeerConnectionHandler``, which raises it when the handshake completes.
///
/// Used only on the connection's event loop (both users are handlers of one pipeline), so it
/// needs no lock and is deliberately not `Sendable`.
final class FrameLengthLimit {
    /// The longest frame body accepted now, in bytes.
    private(set) var current: Int
    /// Whether ``current`` will not change any more: the decoder may then check the frames of a
    /// read against it together, and pass them up together (``InboundFrame/frames(_:)``).
    private(set) var isFinal: Bool

    /// A limit of `current` bytes; `isFinal`: it never changes (else ``raise(to:)`` makes it final).
    init(_ current: Int, isFinal: Bool = false) {
        self.current = current
        self.isFinal = isFinal
    }

    /// Sets the limit for the rest of the connection (the handshake completed).
    func raise(to limit: Int) {
        current = limit
        isFinal = true
    }
}
