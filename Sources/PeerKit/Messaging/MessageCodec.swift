import Foundation
import NIOCore
import NIOFoundationCompat
internal import PeerKitJSON

/// A message encoded once, ready to be framed for any number of peers.
struct EncodedMessage: Sendable {
    /// The wire key.
    var type: String
    /// The payload's JSON text.
    var payload: ByteBuffer
    /// The frame the payload was encoded straight into, when it was (`payload` is then a slice
    /// of it): with ``encodedID`` and ``encodedReplyTo`` and no `group`. `frame(id:replyTo:)`
    /// for those two returns it, and sending it copies nothing: a plain frame for `broadcast`
    /// and `send(_:to:)`, a request's frame with its id, a reply's with the id it answers.
    private var encodedFrame: ByteBuffer?
    /// The `id` that ``encodedFrame`` carries.
    private var encodedID: String?
    /// The `replyTo` that ``encodedFrame`` carries.
    private var encodedReplyTo: String?

    /// A message whose payload JSON is already written.
    init(type: String, payload: ByteBuffer) {
        self.type = type
        self.payload = payload
        self.encodedFrame = nil
    }

    /// Encodes `value` (with ``PayloadEncoder``) straight into the frame that
    /// `frame(id:replyTo:)` returns for the same `id` and `replyTo`, a buffer started with room
    /// for `capacity` bytes.
    init<T: Encodable>(type: String, encoding value: T, id: String? = nil, replyTo: String? = nil, capacity: Int = WireKey.minimumFrameCapacity, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws {
        try self.init(type: type, id: id, replyTo: replyTo, capacity: capacity, allocator: allocator) { frame in
            try PayloadEncoder.encode(value, appendingTo: consume frame)
        }
    }

    /// Writes `value`'s payload with its own ``PeerPayloadEncodable/encode(to:)`` straight into
    /// the frame that `frame(id:replyTo:)` returns for the same `id` and `replyTo`, a buffer
    /// started with room for `capacity` bytes.
    init<T: PeerPayloadEncodable>(type: String, writing value: T, id: String? = nil, replyTo: String? = nil, capacity: Int = WireKey.minimumFrameCapacity, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws {
        try self.init(type: type, id: id, replyTo: replyTo, capacity: capacity, allocator: allocator) { frame in
            var payload = PayloadWriter(appendingTo: consume frame)
            try value.encode(to: &payload)
            return try payload.finish()
        }
    }

    /// The message whose payload `writePayload` appends to the frame it is given, after the
    /// envelope's head.
    private init(type: String, id: String?, replyTo: String?, capacity: Int, allocator: ByteBufferAllocator, writePayload: (consuming ByteBuffer) throws -> ByteBuffer) throws {
        var frame = allocator.buffer(capacity: capacity)
        let lengthIndex = EnvelopeEncoder.writeHead(type: type, id: id, replyTo: replyTo, into: &frame)
        let payloadStart = frame.writerIndex
        // `consume`: the frame is then referenced once, so writing to it copies nothing.
        frame = try writePayload(consume frame)
        let payloadEnd = frame.writerIndex
        EnvelopeEncoder.writeTail(lengthIndex: lengthIndex, into: &frame)
        if capacity > WireKey.minimumFrameCapacity, frame.readableBytes * 2 < frame.capacity {
            // Started for a larger frame of its type (``WireKey``): it does not keep that room
            // in an outbox, which counts its bytes. A buffer grown from the smallest one holds
            // at most twice its bytes; so does this. The frame starts at index 0, so the
            // payload's indexes hold in the copy.
            var exact = allocator.buffer(capacity: frame.readableBytes)
            exact.writeImmutableBuffer(frame)
            frame = exact
        }
        // The payload is a view of the finished frame's bytes: moving a copy's indices shares the
        // storage, and neither is written again, so neither is ever copied.
        var payload = frame
        payload.moveWriterIndex(to: payloadEnd)
        payload.moveReaderIndex(to: payloadStart)
        self.type = type
        self.payload = payload
        self.encodedFrame = frame
        self.encodedID = id
        self.encodedReplyTo = replyTo
    }

    /// The size of the frame the payload was encoded straight into, when it was.
    var encodedFrameBytes: Int? { encodedFrame?.readableBytes }

    /// The frame carrying this message; `group` names the group it is sent to (feature `groups`).
    /// The frame the payload was encoded into when it carries the same `id` and `replyTo` and no
    /// group; otherwise a new one, with a copy of the payload.
    func frame(id: String? = nil, replyTo: String? = nil, group: String? = nil) -> ByteBuffer {
        if group == nil, id == encodedID, replyTo == encodedReplyTo, let encodedFrame { return encodedFrame }
        return EnvelopeEncoder.frame(type: type, id: id, replyTo: replyTo, group: group, payload: payload.readableBytesView)
    }
}

/// Turns `Codable` values into payload JSON and back, with errors as ``PeerKitError``.
enum MessageCodec {
    /// Encodes `value` (with ``PayloadEncoder``) as the payload of a message of its wire key,
    /// straight into the frame that carries it with `id` (a request's) or `replyTo` (a reply's).
    static func encode<T: Encodable>(_ value: T, id: String? = nil, replyTo: String? = nil) throws -> EncodedMessage {
        let key = wireKey(of: T.self)
        let type = key.name
        guard !key.isReserved else {
            throw PeerKitError.encodingFailed(type: type, reason: "wire keys starting with \"peerkit.\" are reserved for the protocol")
        }
        do {
            let message: EncodedMessage
            if key.writesOwnPayload, let value = value as? any PeerPayloadEncodable {
                message = try EncodedMessage(type: type, writing: value, id: id, replyTo: replyTo, capacity: key.frameCapacity)
            } else {
                message = try EncodedMessage(type: type, encoding: value, id: id, replyTo: replyTo, capacity: key.frameCapacity)
            }
            if let bytes = message.encodedFrameBytes { key.noteFrame(bytes: bytes) }
            return message
        } catch {
            throw PeerKitError.encodingFailed(type: type, reason: "\(error)")
        }
    }

    /// Encodes the payload of a control frame of the protocol's own `type` (`peerkit.…`).
    /// Control payloads hold strings, integers and arrays of them, which ``PayloadEncoder``
    /// cannot fail to encode; an empty object stands in should that change, rather than a crash.
    static func encodeControl<T: Encodable>(type: String, _ value: T) -> EncodedMessage {
        let payload = (try? PayloadEncoder.encode(value)) ?? ByteBuffer(string: "{}")
        return EncodedMessage(type: type, payload: payload)
    }

    /// Decodes a payload as `T` (with ``PayloadDecoder``, which reads the bytes in place, or with
    /// `T`'s own ``PeerPayloadDecodable/init(from:)``).
    ///
    /// - Parameter syntaxChecked: true for payloads out of ``EnvelopeParser``, which checked them.
    static func decode<T: Decodable>(_ type: T.Type, from payload: ByteBuffer, syntaxChecked: Bool = false) throws -> T {
        if let reading = T.self as? any PeerPayloadDecodable.Type, let value = try read(reading, from: payload, syntaxChecked: syntaxChecked) as? T {
            return value
        }
        return try withDecodingErrors(T.self) { try PayloadDecoder.decode(T.self, from: payload, syntaxChecked: syntaxChecked) }
    }

    /// Decodes the payload of `envelope`, out of ``EnvelopeParser``, as `T`, with what the
    /// envelope scan learnt about it (its syntax is checked; where its long strings end).
    static func decode<T: Decodable>(_ type: T.Type, from envelope: Envelope) throws -> T {
        try withDecodingErrors(T.self) { try envelope.decodePayload(T.self) }
    }

    /// What decodes `T`'s payloads out of ``EnvelopeParser``: `T`'s own
    /// ``PeerPayloadDecodable/init(from:)`` when it has one, else ``decode(_:from:)-(_,Envelope)``.
    /// Worked out once, where a handler is registered, so that each message pays no dynamic cast.
    static func decoder<T: Decodable & SendableMetatype>(for type: T.Type) -> @Sendable (Envelope) throws -> T {
        if let reading = T.self as? any PeerPayloadDecodable.Type, let decode = ownDecoder(reading, as: T.self) {
            return decode
        }
        return { envelope in try decode(T.self, from: envelope) }
    }

    /// The decoder of payloads of `Own`, a type that reads its own, as a decoder of `T`, which
    /// is `Own` (nil if it is not). The cast is made here, where `Own` is a type: out of a call
    /// with an existential, the closure's result would be erased to the protocol, and the cast
    /// would fail.
    private static func ownDecoder<Own: PeerPayloadDecodable, T>(_ type: Own.Type, as: T.Type) -> (@Sendable (Envelope) throws -> T)? {
        let decode: @Sendable (Envelope) throws -> Own = { envelope in
            try read(Own.self, from: envelope.payload, syntaxChecked: true, longStringEnds: envelope.payloadStringEnds)
        }
        return decode as? @Sendable (Envelope) throws -> T
    }

    /// Decodes a payload with `T`'s own ``PeerPayloadDecodable/init(from:)``, errors as for
    /// `Decodable` types.
    private static func read<T: PeerPayloadDecodable>(_ type: T.Type, from payload: ByteBuffer, syntaxChecked: Bool, longStringEnds: [Int: Int] = [:]) throws -> T {
        try withDecodingErrors(T.self) {
            try JSONObjectReader.read(payload, syntaxChecked: syntaxChecked, longStringEnds: longStringEnds) { object in
                try T(from: PayloadReader(object: object))
            }
        }
    }

    /// The result of `decode`, with its errors as ``PeerKitError/payloadDecodingFailed(type:reason:)``.
    static func withDecodingErrors<T>(_ type: T.Type, _ decode: () throws -> T) throws -> T {
        do {
            return try decode()
        } catch let error as DecodingError {
            throw PeerKitError.payloadDecodingFailed(type: peerMessageType(of: T.self), reason: describe(error))
        } catch {
            throw PeerKitError.payloadDecodingFailed(type: peerMessageType(of: T.self), reason: "\(error)")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }
            return keys.isEmpty ? "the payload" : "\"\(keys.joined(separator: "."))\""
        }
        switch error {
        case let .keyNotFound(key, context):
            return "the key \"\(key.stringValue)\" is missing from \(path(context))"
        case let .typeMismatch(type, context):
            return "\(path(context)) is not of type \(type)"
        case let .valueNotFound(type, context):
            return "\(path(context)) has no \(type) value"
        case let .dataCorrupted(context):
            return "\(path(context)) is not valid: \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
