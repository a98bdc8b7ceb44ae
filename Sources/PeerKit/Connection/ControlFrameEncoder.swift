import NIOCore
internal import PeerKitJSON

extension ConnectionStateMachine.ControlFrame {
    /// Pings and pongs: they may overtake queued data, which no other frame may.
    var isHeartbeat: Bool {
        switch self {
        case .ping, .pong: return true
        case .hello, .bye, .error, .rename: return false
        }
    }

    /// The frame's bytes, length field included.
    ///
    /// Payloads are encoded by PeerKit's JSON codec (``PayloadEncoder``), the one that encodes
    /// application messages; the envelope around them by ``EnvelopeEncoder``. Received control
    /// frames are decoded by the same codec (``Envelope/decodePayload(_:syntaxChecked:)``).
    func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        switch self {
        case let .hello(hello):
            return Self.frame(type: EnvelopeType.hello, payload: hello, allocator: allocator)
        case .ping, .pong:
            var buffer = allocator.buffer(capacity: 64)
            encode(into: &buffer)
            return buffer
        case let .bye(reason):
            return Self.frame(type: EnvelopeType.bye, payload: Bye(reason: reason), allocator: allocator)
        case let .rename(name):
            return Self.frame(type: EnvelopeType.rename, payload: Rename(name: name), allocator: allocator)
        case let .error(reason, answered):
            return Self.frame(type: EnvelopeType.error, replyTo: answered, payload: ErrorPayload(reason: reason), allocator: allocator)
        }
    }

    /// Appends the frame's bytes, length field included, to `buffer`: a ping or a pong written
    /// in place, any other frame as ``encode(allocator:)`` makes it.
    func encode(into buffer: inout ByteBuffer) {
        switch self {
        case let .ping(pingID):
            EnvelopeEncoder.writeFrame(type: EnvelopeType.ping, id: pingID, replyTo: nil, payload: Self.emptyObject, into: &buffer)
        case let .pong(answered):
            EnvelopeEncoder.writeFrame(type: EnvelopeType.pong, id: nil, replyTo: answered, payload: Self.emptyObject, into: &buffer)
        case .hello, .bye, .rename, .error:
            buffer.writeImmutableBuffer(encode())
        }
    }

    private static let emptyObject: [UInt8] = Array("{}".utf8)

    /// A control frame whose payload is `payload`. Control payloads hold only strings, integers
    /// and arrays or objects of strings, which ``PayloadEncoder`` cannot fail to encode (it
    /// throws only for non-finite numbers and for what an `encode(to:)` of its own throws); the
    /// empty payload stands in should that ever change, rather than a crash.
    private static func frame(type: String, replyTo: String? = nil, payload: some Encodable, allocator: ByteBufferAllocator) -> ByteBuffer {
        let json = (try? PayloadEncoder.encode(payload, allocator: allocator)) ?? ByteBuffer(bytes: emptyObject)
        return EnvelopeEncoder.frame(type: type, replyTo: replyTo, payload: json.readableBytesView, allocator: allocator)
    }
}
