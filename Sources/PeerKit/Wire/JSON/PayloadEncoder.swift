import Foundation
import NIOCore

/// Encodes `Encodable` values as JSON straight into a `ByteBuffer`, without building a tree.
///
/// Containers are written as they are used, which works for every `encode(to:)` that uses its
/// containers one after another, as synthesized conformances do. An implementation that goes back
/// to a container it left (or asks for a super encoder) makes this encoder give up, and the value is
/// encoded again with Foundation's `JSONEncoder`, so the result is always right. The output follows
/// `JSONEncoder`'s defaults (`Data` as Base64, `Date` as seconds since 2001, `URL` as a string,
/// `Decimal` as a number, non-finite numbers refused), without escaping '/'.
enum PayloadEncoder {
    /// The JSON text of `value`.
    static func encode<T: Encodable>(_ value: T, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws -> ByteBuffer {
        let output = JSONOutput(buffer: allocator.buffer(capacity: 128))
        do {
            try JSONSlotEncoder(output: output, codingPath: []).encodeValue(value)
            return output.buffer
        } catch is StreamingNotPossible {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .withoutEscapingSlashes
            var buffer = allocator.buffer(capacity: 128)
            try encoder.encode(value, into: &buffer)
            return buffer
        }
    }
}

/// Thrown inside the encoder when containers are used out of order; never escapes ``PayloadEncoder``.
struct StreamingNotPossible: Error {}

/// The output buffer and the stack of open containers.
final class JSONOutput {
    struct Frame {
        var id: Int
        var closing: UInt8
        var count = 0
    }

    var buffer: ByteBuffer
    private(set) var stack: [Frame] = []
    private var nextID = 0

    init(buffer: ByteBuffer) {
        self.buffer = buffer
    }

    /// Opens a container: writes its opening byte and returns its id.
    func open(_ opening: UInt8, closing: UInt8) -> Int {
        nextID += 1
        buffer.writeInteger(opening)
        stack.append(Frame(id: nextID, closing: closing))
        return nextID
    }

    /// Makes `id` the innermost open container, closing the ones opened inside it, and writes
    /// the separator before its next element. Throws when `id` is already closed.
    func beginElement(of id: Int) throws {
        try activate(id)
        if stack[stack.count - 1].count > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
        stack[stack.count - 1].count += 1
    }

    /// Closes every container opened after `id`. Throws when `id` is already closed.
    func activate(_ id: Int) throws {
        guard stack.contains(where: { $0.id == id }) else { throw StreamingNotPossible() }
        while let last = stack.last, last.id != id {
            buffer.writeInteger(last.closing)
            stack.removeLast()
        }
    }

    /// Closes every container opened at or after the depth `depth`.
    func close(toDepth depth: Int) {
        while stack.count > depth, let last = stack.last {
            buffer.writeInteger(last.closing)
            stack.removeLast()
        }
    }
}

/// The `Encoder` for one value slot (the top level, an object member, or an array element).
final class JSONSlotEncoder: Encoder, SingleValueEncodingContainer {
    let output: JSONOutput
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// The container this slot opened, when it opened one.
    private var container: (id: Int, isObject: Bool)?
    private var wroteValue = false

    init(output: JSONOutput, codingPath: [any CodingKey]) {
        self.output = output
        self.codingPath = codingPath
    }

    /// Encodes `value` into this slot and closes whatever it opened.
    func encodeValue<T: Encodable>(_ value: T) throws {
        let depth = output.stack.count
        switch value {
        case let string as String: try encode(string)
        case let int as Int: try encode(int)
        case let double as Double: try encode(double)
        case let bool as Bool: try encode(bool)
        case let data as Data:
            // Base64 never needs escaping: write its bytes between quotes.
            try writeScalar { buffer in
                buffer.writeInteger(UInt8(ascii: "\""))
                buffer.writeBytes(data.base64EncodedData())
                buffer.writeInteger(UInt8(ascii: "\""))
            }
        case let date as Date: try encode(date.timeIntervalSinceReferenceDate)
        case let url as URL: try encode(url.absoluteString)
        case let decimal as Decimal: try writeScalar { $0.writeString(decimal.description) }
        default:
            try value.encode(to: self)
            if container == nil, !wroteValue {
                // Nothing encoded: an empty object, as JSONEncoder writes for nested values.
                output.buffer.writeStaticString("{}")
                wroteValue = true
            }
        }
        output.close(toDepth: depth)
    }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(JSONKeyedEncodingContainer<Key>(slot: self, id: openContainer(object: true)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        JSONUnkeyedEncodingContainer(slot: self, id: openContainer(object: false))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    /// Opens this slot's container, or returns the one it opened (asking twice is allowed).
    /// A conflicting request yields an id that is never open, so the next use falls back.
    private func openContainer(object: Bool) -> Int {
        if let container { return container.isObject == object ? container.id : -1 }
        guard !wroteValue else { return -1 }
        let id = object ? output.open(UInt8(ascii: "{"), closing: UInt8(ascii: "}")) : output.open(UInt8(ascii: "["), closing: UInt8(ascii: "]"))
        container = (id, object)
        return id
    }

    // MARK: SingleValueEncodingContainer

    private func writeScalar(_ write: (inout ByteBuffer) throws -> Void) throws {
        guard container == nil, !wroteValue else { throw StreamingNotPossible() }
        try write(&output.buffer)
        wroteValue = true
    }

    func encodeNil() throws { try writeScalar { $0.writeStaticString("null") } }
    func encode(_ value: Bool) throws { try writeScalar { _ = value ? $0.writeStaticString("true") : $0.writeStaticString("false") } }
    func encode(_ value: String) throws { try writeScalar { EnvelopeEncoder.writeJSONString(value, into: &$0) } }
    func encode(_ value: Double) throws { try floating(value) }
    func encode(_ value: Float) throws { try floating(value) }
    func encode(_ value: Int) throws { try integer(value) }
    func encode(_ value: Int8) throws { try integer(value) }
    func encode(_ value: Int16) throws { try integer(value) }
    func encode(_ value: Int32) throws { try integer(value) }
    func encode(_ value: Int64) throws { try integer(value) }
    func encode(_ value: UInt) throws { try integer(value) }
    func encode(_ value: UInt8) throws { try integer(value) }
    func encode(_ value: UInt16) throws { try integer(value) }
    func encode(_ value: UInt32) throws { try integer(value) }
    func encode(_ value: UInt64) throws { try integer(value) }
    func encode<T: Encodable>(_ value: T) throws {
        guard container == nil, !wroteValue else { throw StreamingNotPossible() }
        try encodeValue(value)
        wroteValue = true
    }

    private func integer<T: FixedWidthInteger>(_ value: T) throws {
        try writeScalar { $0.writeString(String(value)) }
    }

    private func floating<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "Unable to encode \(T.self).\(value) directly in JSON."))
        }
        try writeScalar { buffer in
            var text = value.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            buffer.writeString(text)
        }
    }
}

/// Writes `"key":value` members into an open object.
struct JSONKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: JSONSlotEncoder
    let id: Int
    var codingPath: [any CodingKey] { slot.codingPath }

    private func member(_ key: Key) throws -> JSONSlotEncoder {
        try slot.output.beginElement(of: id)
        EnvelopeEncoder.writeJSONString(key.stringValue, into: &slot.output.buffer)
        slot.output.buffer.writeInteger(UInt8(ascii: ":"))
        return JSONSlotEncoder(output: slot.output, codingPath: codingPath + [key])
    }

    mutating func encodeNil(forKey key: Key) throws { try member(key).encodeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try member(key).encode(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try member(key).encodeValue(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        guard let member = try? member(key) else { return KeyedEncodingContainer(JSONKeyedEncodingContainer<NestedKey>(slot: slot, id: -1)) }
        return member.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        guard let member = try? member(key) else { return JSONUnkeyedEncodingContainer(slot: slot, id: -1) }
        return member.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { UnsupportedEncoder(codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { UnsupportedEncoder(codingPath: codingPath) }
}

/// Writes elements into an open array.
struct JSONUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let slot: JSONSlotEncoder
    let id: Int
    private(set) var count = 0
    var codingPath: [any CodingKey] { slot.codingPath }

    init(slot: JSONSlotEncoder, id: Int) {
        self.slot = slot
        self.id = id
    }

    private mutating func element() throws -> JSONSlotEncoder {
        try slot.output.beginElement(of: id)
        defer { count += 1 }
        return JSONSlotEncoder(output: slot.output, codingPath: codingPath + [JSONIndexKey(intValue: count)])
    }

    mutating func encodeNil() throws { try element().encodeNil() }
    mutating func encode(_ value: Bool) throws { try element().encode(value) }
    mutating func encode(_ value: String) throws { try element().encode(value) }
    mutating func encode(_ value: Double) throws { try element().encode(value) }
    mutating func encode(_ value: Float) throws { try element().encode(value) }
    mutating func encode(_ value: Int) throws { try element().encode(value) }
    mutating func encode(_ value: Int8) throws { try element().encode(value) }
    mutating func encode(_ value: Int16) throws { try element().encode(value) }
    mutating func encode(_ value: Int32) throws { try element().encode(value) }
    mutating func encode(_ value: Int64) throws { try element().encode(value) }
    mutating func encode(_ value: UInt) throws { try element().encode(value) }
    mutating func encode(_ value: UInt8) throws { try element().encode(value) }
    mutating func encode(_ value: UInt16) throws { try element().encode(value) }
    mutating func encode(_ value: UInt32) throws { try element().encode(value) }
    mutating func encode(_ value: UInt64) throws { try element().encode(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try element().encodeValue(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        guard let element = try? element() else { return KeyedEncodingContainer(JSONKeyedEncodingContainer<NestedKey>(slot: slot, id: -1)) }
        return element.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        guard let element = try? element() else { return JSONUnkeyedEncodingContainer(slot: slot, id: -1) }
        return element.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { UnsupportedEncoder(codingPath: codingPath) }
}

/// Handed out for `superEncoder()`: every use makes ``PayloadEncoder`` fall back to `JSONEncoder`.
struct UnsupportedEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(UnsupportedKeyed<Key>(codingPath: codingPath))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { UnsupportedUnkeyed(codingPath: codingPath) }
    func singleValueContainer() -> any SingleValueEncodingContainer { UnsupportedUnkeyed(codingPath: codingPath) }
}

private struct UnsupportedKeyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let codingPath: [any CodingKey]
    mutating func encodeNil(forKey key: Key) throws { throw StreamingNotPossible() }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw StreamingNotPossible() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(UnsupportedKeyed<NestedKey>(codingPath: codingPath))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { UnsupportedUnkeyed(codingPath: codingPath) }
    mutating func superEncoder() -> any Encoder { UnsupportedEncoder(codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { UnsupportedEncoder(codingPath: codingPath) }
}

private struct UnsupportedUnkeyed: UnkeyedEncodingContainer, SingleValueEncodingContainer {
    let codingPath: [any CodingKey]
    var count: Int { 0 }
    mutating func encodeNil() throws { throw StreamingNotPossible() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw StreamingNotPossible() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(UnsupportedKeyed<NestedKey>(codingPath: codingPath))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { UnsupportedUnkeyed(codingPath: codingPath) }
    mutating func superEncoder() -> any Encoder { UnsupportedEncoder(codingPath: codingPath) }
}
