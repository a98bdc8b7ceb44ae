/// A keyed container over an object's indexed members; values are decoded when asked for.
///
/// It holds only the object's path and its members (which hold the document), not the decoder
/// that opened it: `KeyedDecodingContainer` copies the container for every value asked for, and
/// each reference held is retained and released on every copy.
struct JSONKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// The path of this object, shared by its members' decoders; nil for the top level.
    let path: JSONCodingPath?
    let members: JSONObjectMembers

    /// The path of this object: the path of the decoder that opened it, ending with its key.
    var codingPath: [any CodingKey] { JSONCodingPath.keys(path, then: nil) }

    /// The member whose value starts at `offset`, at `key`.
    private func member(at offset: Int, key: any CodingKey) -> JSONValue {
        JSONValue(document: members.document, offset: offset, parent: path, key: key)
    }

    /// The keys present, each once (the first of repeated names), as in JSONDecoder.
    var allKeys: [Key] {
        members.names().compactMap(Key.init(stringValue:))
    }

    func contains(_ key: Key) -> Bool { members.valueOffset(forName: key.stringValue) != nil }

    private func child(_ key: Key) throws -> JSONValue {
        guard let offset = members.valueOffset(forName: key.stringValue) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key.stringValue)."))
        }
        return member(at: offset, key: key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decodeValue(type) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let offset = members.valueOffset(forName: key.stringValue) else { return nil }
        let value = member(at: offset, key: key)
        return value.decodeNil() ? nil : try value.decodeValue(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let member = try child(key)
        return try member.container(keyedBy: type, path: member.path)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let member = try child(key)
        return try member.unkeyedContainer(path: member.path)
    }

    func superDecoder() throws -> any Decoder {
        guard let offset = members.valueOffset(forName: "super") else {
            throw DecodingError.keyNotFound(JSONIndexKey.super, .init(codingPath: codingPath, debugDescription: "No value associated with key super."))
        }
        return member(at: offset, key: JSONIndexKey.super).decoder
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key).decoder }
}

/// An unkeyed container over an array's element offsets.
struct JSONUnkeyedContainer: UnkeyedDecodingContainer {
    let document: JSONDocument
    /// The path of this array, shared by its elements.
    let path: JSONCodingPath?
    let elements: [Int]
    private(set) var currentIndex = 0

    init(document: JSONDocument, path: JSONCodingPath?, elements: [Int]) {
        self.document = document
        self.path = path
        self.elements = elements
    }

    var codingPath: [any CodingKey] { JSONCodingPath.keys(path, then: nil) }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private func current<T>(_ type: T.Type) throws -> JSONValue {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [JSONIndexKey(intValue: currentIndex)], debugDescription: "Unkeyed container is at end."))
        }
        return JSONValue(document: document, offset: elements[currentIndex], parent: path, key: JSONIndexKey(intValue: currentIndex))
    }

    private mutating func next<T>(_ decode: (JSONValue) throws -> T) throws -> T {
        let value = try decode(try current(T.self))
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard try current(Never.self).decodeNil() else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try $0.decode(type) } }
    mutating func decode(_ type: String.Type) throws -> String { try next { try $0.decode(type) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next { try $0.decode(type) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try $0.decode(type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try $0.decode(type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try $0.decode(type) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try $0.decodeValue(type) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next { try $0.container(keyedBy: type, path: $0.path) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next { try $0.unkeyedContainer(path: $0.path) }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next { $0.decoder }
    }
}
