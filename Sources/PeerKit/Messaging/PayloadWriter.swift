import NIOCore
internal import PeerKitJSON

/// Writes a message's payload, a JSON object, member by member: what a
/// ``PeerPayloadEncodable`` type's ``PeerPayloadEncodable/encode(to:)`` writes through.
///
/// Strings, Booleans and integers are written straight into the frame. Any other `Encodable`
/// value (a nested struct, an array, an optional, `Data`, `Date`) is written by PeerKit's JSON
/// encoder, as when the whole message goes through `Encodable`. Each key may be written once:
/// writing one twice makes the message fail to encode, with
/// ``PeerKitError/encodingFailed(type:reason:)`` naming the key.
public struct PayloadWriter {
    var object: JSONObjectWriter

    init(appendingTo buffer: consuming ByteBuffer) {
        object = JSONObjectWriter(appendingTo: consume buffer)
    }

    /// Closes the object and returns the buffer.
    mutating func finish() throws -> ByteBuffer {
        try object.finish()
    }

    /// Writes `value` under `key`.
    public mutating func write(_ value: String, forKey key: StaticString) { object.write(value, forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: Bool, forKey key: StaticString) { object.write(value, forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: Int, forKey key: StaticString) { object.write(Int64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: Int8, forKey key: StaticString) { object.write(Int64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: Int16, forKey key: StaticString) { object.write(Int64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: Int32, forKey key: StaticString) { object.write(Int64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: Int64, forKey key: StaticString) { object.write(value, forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: UInt, forKey key: StaticString) { object.write(UInt64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: UInt8, forKey key: StaticString) { object.write(UInt64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: UInt16, forKey key: StaticString) { object.write(UInt64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: UInt32, forKey key: StaticString) { object.write(UInt64(value), forKey: key) }
    /// Writes `value` under `key`.
    public mutating func write(_ value: UInt64, forKey key: StaticString) { object.write(value, forKey: key) }

    /// Writes `value` under `key`, as `JSONEncoder` writes it.
    ///
    /// - Throws: `EncodingError.invalidValue` for an infinity or NaN, which JSON cannot hold;
    ///   nothing of the member is written then.
    public mutating func write(_ value: Double, forKey key: StaticString) throws { try object.write(value, forKey: key) }
    /// Writes `value` under `key`, as `JSONEncoder` writes it.
    ///
    /// - Throws: `EncodingError.invalidValue` for an infinity or NaN, which JSON cannot hold;
    ///   nothing of the member is written then.
    public mutating func write(_ value: Float, forKey key: StaticString) throws { try object.write(value, forKey: key) }

    /// Writes any other `Encodable` value under `key`, with PeerKit's JSON encoder.
    ///
    /// - Throws: what the value's encoding throws; nothing of the member is written then.
    public mutating func write<T: Encodable>(_ value: T, forKey key: StaticString) throws { try object.write(value, forKey: key) }

    /// Writes `value` under `key` unless it is nil, as a synthesized `Encodable` conformance
    /// writes an optional property (`encodeIfPresent`).
    ///
    /// - Throws: what the value's encoding throws; nothing of the member is written then.
    public mutating func writeIfPresent<T: Encodable>(_ value: T?, forKey key: StaticString) throws {
        guard let value else { return }
        try write(value, forKey: key)
    }
}
