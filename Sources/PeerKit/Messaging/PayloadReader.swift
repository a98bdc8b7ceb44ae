internal import PeerKitJSON

/// Reads a message's payload, a JSON object, member by member: what a
/// ``PeerPayloadDecodable`` type's ``PeerPayloadDecodable/init(from:)`` reads through.
///
/// It reads as `Decodable`'s keyed container does: keys in any order, unknown keys ignored, the
/// first of repeated keys, numbers that do not fit refused; a missing key or a value of the wrong
/// type throws the `DecodingError` the container would throw. Strings, Booleans and numbers are
/// read where they lie in the frame; any other `Decodable` value by PeerKit's JSON decoder.
///
/// A reader reads the frame's bytes in place, and holds the frame while it exists: read what you
/// need in ``PeerPayloadDecodable/init(from:)``, and do not keep the reader.
public struct PayloadReader {
    let object: JSONObjectReader

    /// Whether the payload has a member named `key`.
    public func contains(_ key: StaticString) -> Bool { object.contains(key) }

    /// The value under `key`.
    ///
    /// - Throws: `DecodingError.keyNotFound` when there is none, `DecodingError.typeMismatch`
    ///   or `valueNotFound` when it is not a string.
    public func read(_ type: String.Type, forKey key: StaticString) throws -> String { try object.decode(type, forKey: key) }
    /// The value under `key`.
    ///
    /// - Throws: `DecodingError.keyNotFound` when there is none, `DecodingError.typeMismatch`
    ///   or `valueNotFound` when it is not `true` or `false`.
    public func read(_ type: Bool.Type, forKey key: StaticString) throws -> Bool { try object.decode(type, forKey: key) }
    /// The value under `key`.
    ///
    /// - Throws: `DecodingError.keyNotFound` when there is none, `DecodingError.typeMismatch`
    ///   or `valueNotFound` when it is not a number, `dataCorrupted` when it does not fit.
    public func read(_ type: Int.Type, forKey key: StaticString) throws -> Int { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: Int8.Type, forKey key: StaticString) throws -> Int8 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: Int16.Type, forKey key: StaticString) throws -> Int16 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: Int32.Type, forKey key: StaticString) throws -> Int32 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: Int64.Type, forKey key: StaticString) throws -> Int64 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: UInt.Type, forKey key: StaticString) throws -> UInt { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: UInt8.Type, forKey key: StaticString) throws -> UInt8 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: UInt16.Type, forKey key: StaticString) throws -> UInt16 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: UInt32.Type, forKey key: StaticString) throws -> UInt32 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: UInt64.Type, forKey key: StaticString) throws -> UInt64 { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: Double.Type, forKey key: StaticString) throws -> Double { try object.decode(type, forKey: key) }
    /// The value under `key`; throws as ``read(_:forKey:)-(Int.Type,_)`` does.
    public func read(_ type: Float.Type, forKey key: StaticString) throws -> Float { try object.decode(type, forKey: key) }

    /// Any other `Decodable` value under `key` (a nested struct, an array, `Data`, `Date`),
    /// read by PeerKit's JSON decoder.
    ///
    /// - Throws: `DecodingError.keyNotFound` when there is none, and what decoding the value throws.
    public func read<T: Decodable>(_ type: T.Type, forKey key: StaticString) throws -> T { try object.decode(type, forKey: key) }

    /// The value under `key`, or nil when there is none or it is `null`, as a synthesized
    /// `Decodable` conformance reads an optional property (`decodeIfPresent`).
    ///
    /// - Throws: what decoding a value that is there throws.
    public func readIfPresent<T: Decodable>(_ type: T.Type, forKey key: StaticString) throws -> T? { try object.decodeIfPresent(type, forKey: key) }
}
