import NIOCore
import NIOExtras

/// Splits the inbound byte stream into frames and refuses an oversized frame before buffering it.
///
///     +---------------------+------------------------------+
///     | length N (UInt32 BE) | N bytes: UTF-8 JSON envelope |
///     +---------------------+------------------------------+
///
/// The splitting is NIOExtras' `LengthFieldBasedFrameDecoder`; it has no maximum of its own, so this
/// decoder reads each length field before handing the bytes to it and throws
/// ``WireError/frameTooLarge(length:limit:)`` for a frame above `maximumFrameLength`, while only
/// its four length bytes have been read.
///
/// The limit can change while the connection runs: it starts at the small pre-handshake limit
/// and the connection handler raises it once the handshake completed (``FrameLengthLimit``).
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// The longest body accepted now, in bytes.
    var maximumFrameLength: Int { limit.current }

    private let limit: FrameLengthLimit
    private let splitter = LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes, lengthFieldEndianness: .big)
    /// Whether the splitter is waiting for a length field (rather than for the body of a frame whose length it read).
    private var expectingLengthField = true

    /// A decoder whose limit follows `limit`.
    init(limit: FrameLengthLimit) {
        self.limit = limit
    }

    /// A decoder with a fixed limit.
    init(maximumFrameLength: Int) {
        self.init(limit: FrameLengthLimit(maximumFrameLength))
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if expectingLengthField {
            guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else {
                return .needMoreData
            }
            let maximum = limit.current
            guard length <= maximum else {
                throw WireError.frameTooLarge(length: Int(length), limit: maximum)
            }
            // With four bytes available the splitter consumes the length field now.
            expectingLengthField = false
        }
        let state = try splitter.decode(context: context, buffer: &buffer)
        if case .continue = state {
            expectingLengthField = true
        }
        return state
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while case .continue = try decode(context: context, buffer: &buffer) {}
        if buffer.readableBytes > 0 || !expectingLengthField {
            throw WireError.truncatedFrame(bytesLeft: buffer.readableBytes)
        }
        return .needMoreData
    }
}

/// The frame limit of one connection, shared by its ``FrameDecoder`` and its
/// ``PeerConnectionHandler``, which raises it when the handshake completes.
///
/// Used only on the connection's event loop (both users are handlers of one pipeline), so it
/// needs no lock and is deliberately not `Sendable`.
final class FrameLengthLimit {
    /// The longest frame body accepted now, in bytes.
    var current: Int

    init(_ current: Int) {
        self.current = current
    }
}
