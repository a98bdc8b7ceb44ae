/// The `Decoder` (and single-value container) that a value's own `init(from:)` reads it through.
///
/// Three words, so that the `any Decoder` each `init(from:)` receives holds it inline: a larger
/// decoder is copied into a box on the heap for every composite value decoded. What it needs
/// besides the value's place is its path, one node that ends with the value's key; the reading
/// itself is ``JSONValue``'s.
struct JSONValueDecoder: Decoder, SingleValueDecodingContainer {
    let document: JSONDocument
    /// Where the value starts (no leading whitespace).
    let offset: Int
    /// The path of this value: its container's path ending with its key; nil at the top level.
    let path: JSONCodingPath?

    var codingPath: [any CodingKey] { JSONCodingPath.keys(path, then: nil) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The value this decoder reads, with its path split back into its container's and its key.
    private var value: JSONValue {
        JSONValue(document: document, offset: offset, parent: path?.parent, key: path?.key)
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try value.container(keyedBy: type, path: path)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try value.unkeyedContainer(path: path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool { value.decodeNil() }
    func decode(_ type: Bool.Type) throws -> Bool { try value.decode(type) }
    func decode(_ type: String.Type) throws -> String { try value.decode(type) }
    func decode(_ type: Double.Type) throws -> Double { try value.decode(type) }
    func decode(_ type: Float.Type) throws -> Float { try value.decode(type) }
    func decode(_ type: Int.Type) throws -> Int { try value.decode(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try value.decode(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try value.decode(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try value.decode(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try value.decode(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try value.decode(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try value.decode(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try value.decode(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try value.decode(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try value.decode(type) }

    /// A single-value container's value is this decoder's own, at the same path.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard JSONValue.hasOwnDecoding(T.self) else { return try T(from: self) }
        return try value.decodeOwn(type)
    }
}
