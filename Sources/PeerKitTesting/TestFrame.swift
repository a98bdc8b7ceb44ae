import Foundation
import NIOCore

/// A frame crossing a ``TestNetwork`` connection, as a fault rule sees it
/// (``TestNetwork/dropFrames(from:to:where:)``).
public struct TestFrame: Sendable {
    /// The envelope's `type`: a message's wire key, or `peerkit.hello`, `peerkit.ping`, …; nil
    /// when the bytes are not a frame holding a JSON envelope.
    public let type: String?
    /// The envelope's `id` (set on requests and pings).
    public let id: String?
    /// The envelope's `replyTo` (set on replies and pongs).
    public let replyTo: String?
    /// The whole frame: the 4-byte length, then the envelope.
    public let bytes: ByteBuffer

    /// Whether this is one of the protocol's own frames (`peerkit.…`): hello, ping, pong, bye, error, rename.
    public var isControl: Bool { type?.hasPrefix("peerkit.") ?? false }

    init(bytes: ByteBuffer, isFrame: Bool) {
        self.bytes = bytes
        var body = bytes
        if isFrame, body.readInteger(as: UInt32.self) != nil,
           let data = body.readData(length: body.readableBytes),
           let envelope = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            type = envelope["type"] as? String
            id = envelope["id"] as? String
            replyTo = envelope["replyTo"] as? String
        } else {
            type = nil
            id = nil
            replyTo = nil
        }
    }
}

/// Splits the relay's byte stream into whole frames, length field included. A length over
/// ``passThroughLength`` means the bytes are not frames (a test that sends garbage): from then
/// on bytes are passed on as they come.
struct RawFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = TestFrame
    static let passThroughLength = 64 << 20
    private var passThrough = false

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if passThrough {
            guard buffer.readableBytes > 0, let bytes = buffer.readSlice(length: buffer.readableBytes) else { return .needMoreData }
            context.fireChannelRead(wrapInboundOut(TestFrame(bytes: bytes, isFrame: false)))
            return .continue
        }
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return .needMoreData }
        if Int(length) > Self.passThroughLength {
            passThrough = true
            return .continue
        }
        guard let frame = buffer.readSlice(length: 4 + Int(length)) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(TestFrame(bytes: frame, isFrame: true)))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        if buffer.readableBytes > 0, let rest = buffer.readSlice(length: buffer.readableBytes) {
            // A truncated frame: pass on what there is, as a socket would.
            context.fireChannelRead(wrapInboundOut(TestFrame(bytes: rest, isFrame: false)))
        }
        return .needMoreData
    }
}
