import NIOCore

/// Reads the members of one JSON object by name: what PeerKit's `PayloadReader` reads through,
/// for message types that read their own payload rather than through `Decodable`'s containers.
///
/// It reads as a keyed container of ``PayloadDecoder`` does, from the same parts: the members
/// indexed once by ``JSONObjectMembers`` (names compared as strings, the first of repeated names,
/// unknown names ignored), each value read by ``JSONValue``. So a value decodes the same, and a
/// missing key, a value of the wrong kind or a malformed number throws the same `DecodingError`,
/// at the same coding path, as through `Decodable`. What it saves is the generic machinery around
/// them: the container's box, a `CodingKey` per member, and a `String` per name looked up.
///
/// It reads the payload's bytes in place, through a pointer the buffer lent for the
/// ``read(_:syntaxChecked:longStringEnds:_:)`` call that made it. It also holds the buffer, so
/// that a reader kept past that call (which a type's `init(from:)` could do) still points into
/// live, unchanging storage: a `ByteBuffer`'s bytes stay where they are while it is referenced,
/// and writing through another reference copies them first.
package struct JSONObjectReader {
    private let members: JSONObjectMembers
    private let storage: ByteBuffer

    private init(members: JSONObjectMembers, storage: ByteBuffer) {
        self.members = members
        self.storage = storage
    }

    /// Calls `body` with a reader of the object `payload` holds.
    ///
    /// - Parameters:
    ///   - syntaxChecked: true when `payload` is exactly one JSON value whose syntax was already
    ///     checked (as ``EnvelopeParser`` checks every payload), so it is not walked again.
    ///   - longStringEnds: where the payload's long strings end, as the envelope scan found them.
    /// - Throws: `DecodingError.typeMismatch` when the payload is not an object, and what `body`
    ///   throws.
    package static func read<R>(_ payload: ByteBuffer, syntaxChecked: Bool, longStringEnds: [Int: Int], _ body: (JSONObjectReader) throws -> R) throws -> R {
        try PayloadDecoder.withDocument(payload, syntaxChecked: syntaxChecked, longStringEnds: longStringEnds) { document, start in
            try body(JSONObjectReader(members: JSONValue(document: document, offset: start).objectMembers(), storage: payload))
        }
    }

    /// Whether the object has a member named `key`.
    package func contains(_ key: StaticString) -> Bool {
        members.valueOffset(forName: key) != nil
    }

    /// The value of the member `key`, at the path a keyed container gives it; nil when absent.
    private func valueIfPresent(_ key: StaticString) -> JSONValue? {
        members.valueOffset(forName: key).map { JSONValue(document: members.document, offset: $0, key: JSONStaticKey(key)) }
    }

    /// The value of the member `key`; throws `DecodingError.keyNotFound` when absent, as a keyed
    /// container does.
    private func value(_ key: StaticString) throws -> JSONValue {
        guard let value = valueIfPresent(key) else {
            throw DecodingError.keyNotFound(JSONStaticKey(key), .init(codingPath: [], debugDescription: "No value associated with key \(key)."))
        }
        return value
    }

    package func decode(_ type: String.Type, forKey key: StaticString) throws -> String { try value(key).decode(type) }
    package func decode(_ type: Bool.Type, forKey key: StaticString) throws -> Bool { try value(key).decode(type) }
    package func decode(_ type: Double.Type, forKey key: StaticString) throws -> Double { try value(key).decode(type) }
    package func decode(_ type: Float.Type, forKey key: StaticString) throws -> Float { try value(key).decode(type) }
    package func decode(_ type: Int.Type, forKey key: StaticString) throws -> Int { try value(key).decode(type) }
    package func decode(_ type: Int8.Type, forKey key: StaticString) throws -> Int8 { try value(key).decode(type) }
    package func decode(_ type: Int16.Type, forKey key: StaticString) throws -> Int16 { try value(key).decode(type) }
    package func decode(_ type: Int32.Type, forKey key: StaticString) throws -> Int32 { try value(key).decode(type) }
    package func decode(_ type: Int64.Type, forKey key: StaticString) throws -> Int64 { try value(key).decode(type) }
    package func decode(_ type: UInt.Type, forKey key: StaticString) throws -> UInt { try value(key).decode(type) }
    package func decode(_ type: UInt8.Type, forKey key: StaticString) throws -> UInt8 { try value(key).decode(type) }
    package func decode(_ type: UInt16.Type, forKey key: StaticString) throws -> UInt16 { try value(key).decode(type) }
    package func decode(_ type: UInt32.Type, forKey key: StaticString) throws -> UInt32 { try value(key).decode(type) }
    package func decode(_ type: UInt64.Type, forKey key: StaticString) throws -> UInt64 { try value(key).decode(type) }

    /// Decodes any other `Decodable` value, nested objects and arrays included, as a keyed
    /// container does.
    package func decode<T: Decodable>(_ type: T.Type, forKey key: StaticString) throws -> T {
        try value(key).decodeValue(type)
    }

    /// The value of member `key`, or nil when it is absent or `null`, as a keyed container's
    /// `decodeIfPresent` reads it.
    package func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: StaticString) throws -> T? {
        guard let value = valueIfPresent(key), !value.decodeNil() else { return nil }
        return try value.decodeValue(type)
    }
}

/// The coding key of a member read by ``JSONObjectReader``: its name as spelt in the source, made
/// into a `String` only when an error's path is read.
struct JSONStaticKey: CodingKey {
    private let name: StaticString

    init(_ name: StaticString) {
        self.name = name
    }

    /// Keys of this kind are only made from names in the source.
    init?(stringValue: String) { nil }
    init?(intValue: Int) { nil }

    var stringValue: String { name.description }
    var intValue: Int? { nil }
}
