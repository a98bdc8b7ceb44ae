import NIOCore
internal import PeerKitJSON

/// Both codings of a ``PeerPayloadCodable`` type, for PeerKitTesting's `PayloadCodingCheck`, which
/// holds a type's own coding to its `Codable` conformance.
package enum PayloadCodings {
    /// The payload `value` writes itself (``PeerPayloadEncodable/encode(to:)``).
    package static func ownPayload<T: PeerPayloadEncodable>(of value: T) throws -> ByteBuffer {
        try EncodedMessage(type: peerMessageType(of: T.self), writing: value).payload
    }

    /// The payload `value`'s `Encodable` conformance writes, as PeerKit encodes other types.
    package static func codablePayload<T: Encodable>(of value: T) throws -> ByteBuffer {
        try EncodedMessage(type: peerMessageType(of: T.self), encoding: value).payload
    }

    /// `payload` read by `T`'s own ``PeerPayloadDecodable/init(from:)``.
    package static func readOwn<T: PeerPayloadDecodable>(_ type: T.Type, from payload: ByteBuffer) throws -> T {
        try MessageCodec.decode(T.self, from: payload)
    }

    /// `payload` read through `T`'s `Decodable` conformance, as PeerKit decodes other types.
    package static func readCodable<T: Decodable>(_ type: T.Type, from payload: ByteBuffer) throws -> T {
        try MessageCodec.withDecodingErrors(T.self) { try PayloadDecoder.decode(T.self, from: payload) }
    }
}
