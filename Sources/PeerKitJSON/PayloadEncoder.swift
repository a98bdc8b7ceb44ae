import Foundation
import NIOCore
import NIOFoundationCompat

/// Encodes `Encodable` values as JSON straight into a `ByteBuffer`, without building a tree.
///
/// Containers are written as they are used, which works for every `encode(to:)` that uses its
/// containers one after another, as synthesized conformances do. An implementation that goes back
/// to a container it left, encodes a key twice (`JSONEncoder` keeps the last value, in place) or asks
/// for a super encoder makes this encoder give up, and the value is encoded again with Foundation's
/// `JSONEncoder`, so the result is always right. Giving up is remembered even when an `encode(to:)`
/// swallows the error with `try?`. A member or element whose encoding throws leaves nothing behind
/// (the buffer and the open containers are restored), so an `encode(to:)` that skips it with `try?`
/// writes valid JSON without that member, as `JSONEncoder` does. The output follows `JSONEncoder`'s
/// defaults (`Data` as Base64, `Date` as seconds since 2001, `URL` as a string, `Decimal` as a
/// number, non-finite numbers refused), without escaping '/'.
package enum PayloadEncoder {
    /// The JSON text of `value`.
    package static func encode<T: Encodable>(_ value: T, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws -> ByteBuffer {
        try encode(value, appendingTo: allocator.buffer(capacity: 128))
    }

    /// `buffer` with the JSON text of `value` written after its bytes, so that a frame's envelope
    /// can come first and the payload need not be copied behind it.
    package static func encode<T: Encodable>(_ value: T, appendingTo buffer: consuming ByteBuffer) throws -> ByteBuffer {
        let start = buffer.writerIndex
        let output = JSONOutput(buffer: buffer)
        do {
            try JSONSlotEncoder(output: output, codingPath: []).encodeValue(value)
            if !output.gaveUp { return output.takeBuffer() }
        } catch is StreamingNotPossible {
        }
        var buffer = output.takeBuffer()
        buffer.moveWriterIndex(to: start)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        try encoder.encode(value, into: &buffer)
        return buffer
    }
}

/// Thrown inside the encoder when containers are used out of order; never escapes ``PayloadEncoder``.
struct StreamingNotPossible: Error {}

/// The output buffer and the stack of open containers.
final class JSONOutput {
    struct Frame {
        var id: Int
        var closing: UInt8
        /// Members or elements written so far; for an object also the number of its keys.
        var count = 0
        /// This object's first keys, in place, so that a small object's keys cost no allocation...
        var firstKeys = JSONFirstKeys()
        /// ...where its next keys start in ``JSONOutput/keys`` while it has few of them...
        var keysStart: Int
        /// ...and its keys hashed once it has more, so checking for repeats stays linear.
        var keySet: Set<String>?
    }

    /// What to restore when the encoding of one member or element throws.
    struct Mark {
        var writerIndex: Int
        var depth: Int
        var count: Int
        var key: String?
    }

    /// The JSON written so far. `@exclusivity(unchecked)`: the runtime's check of every access
    /// (the buffer is changed on each member, often through a closure) took about an eighth of
    /// encoding a small value, and two accesses cannot overlap here. The encoder runs on one
    /// thread inside one ``PayloadEncoder`` call, and no closure that writes into the buffer
    /// (`write(&output.buffer)`) reaches this output in any other way. Each access is marked
    /// `unsafe`.
    @exclusivity(unchecked) var buffer: ByteBuffer

    // The bookkeeping below is `@exclusivity(unchecked)` too: its runtime checks (one or two
    // per access, several accesses per member) cost about as much as the buffer's did. Accesses
    // cannot overlap: only this class's own methods touch these properties, none of them calls
    // out of the class (no user `encode(to:)`, no closure but `contains(where:)` over the
    // frames, which reads only its argument) while an access is open, so no second access can start before the first ends,
    // and an output is used on one thread inside one ``PayloadEncoder`` call. Each access is
    // marked `unsafe`.

    /// The innermost open container, while ``depth`` is above zero. It is kept apart from the
    /// ones around it, so that a value with no nested containers (most messages) needs no array
    /// of frames: an allocation on every encode.
    @exclusivity(unchecked) private var innermost = Frame(id: 0, closing: 0, keysStart: 0)
    /// The open containers around ``innermost``, outermost first.
    @exclusivity(unchecked) private var outer: [Frame] = []
    /// How many containers are open: ``outer``'s and ``innermost``.
    @exclusivity(unchecked) private var openCount = 0
    /// The keys written so far into the open objects that have few, innermost last, after each
    /// object's ``JSONFirstKeys``. Only the innermost container gets members, so its keys are
    /// always the tail; one array serves every object of the value instead of one array each.
    @exclusivity(unchecked) private var keys: [String] = []
    @exclusivity(unchecked) private var nextID = 0
    /// Set once streaming is not possible, even if an `encode(to:)` then swallowed the error:
    /// ``PayloadEncoder`` re-encodes the value with `JSONEncoder`.
    @exclusivity(unchecked) private var didGiveUp = false

    init(buffer: ByteBuffer) {
        unsafe self.buffer = buffer
    }

    /// How many containers are open.
    var depth: Int { unsafe openCount }

    /// Whether streaming was found not possible (see ``giveUp()``).
    var gaveUp: Bool { unsafe didGiveUp }

    /// The buffer, no longer referenced here, so that the caller's next write does not copy it.
    func takeBuffer() -> ByteBuffer {
        defer { unsafe buffer = ByteBuffer() }
        return unsafe buffer
    }

    /// Opens a container: writes its opening byte and returns its id.
    func open(_ opening: UInt8, closing: UInt8) -> Int {
        unsafe nextID += 1
        unsafe buffer.writeInteger(opening)
        if unsafe openCount > 0 { unsafe outer.append(innermost) }
        unsafe innermost = Frame(id: nextID, closing: closing, keysStart: keys.count)
        unsafe openCount += 1
        return unsafe nextID
    }

    /// Records that streaming is not possible and returns the error to throw.
    func giveUp() -> StreamingNotPossible {
        unsafe didGiveUp = true
        return StreamingNotPossible()
    }

    /// Makes `id` the innermost open container, closing the ones opened inside it, and writes
    /// the separator before its next element. Throws when `id` is already closed. Returns what
    /// ``restore(_:)`` needs to take the element back.
    func beginElement(of id: Int) throws -> Mark {
        try activate(id)
        let mark = unsafe Mark(writerIndex: buffer.writerIndex, depth: openCount, count: innermost.count, key: nil)
        if unsafe innermost.count > 0 { unsafe buffer.writeInteger(UInt8(ascii: ",")) }
        unsafe innermost.count += 1
        return mark
    }

    /// Makes `id` the innermost open container, closing the ones opened inside it, and writes
    /// its next member's name `key` with the separator before it and the ':' after it, in one
    /// write. Throws when `id` is already closed or `key` was already written. Returns what
    /// ``restore(_:)`` needs to take the member back.
    func beginMember(of id: Int, key: String) throws -> Mark {
        try activate(id)
        let count = unsafe innermost.count
        let mark = unsafe Mark(writerIndex: buffer.writerIndex, depth: openCount, count: count, key: key)
        if !insertKey(key) { throw giveUp() }
        unsafe JSONStringWriter.write(key, into: &buffer, prefix: count > 0 ? "," : "", suffix: ":")
        unsafe innermost.count += 1
        return mark
    }

    /// Records `key` for the innermost object; false when it was already written (compared as
    /// `JSONEncoder`'s dictionary compares keys: as Swift strings).
    private func insertKey(_ key: String) -> Bool {
        if unsafe innermost.keySet != nil {
            return unsafe innermost.keySet?.insert(key).inserted ?? true
        }
        // The object's keys so far: the first ones in its frame, the others in `keys`.
        let count = unsafe innermost.count
        if unsafe innermost.firstKeys.contains(key, among: min(count, JSONFirstKeys.capacity)) { return false }
        if count < JSONFirstKeys.capacity {
            unsafe innermost.firstKeys.set(key, at: count)
            return true
        }
        let start = unsafe innermost.keysStart
        guard unsafe !keys[start...].contains(key) else { return false }
        unsafe keys.append(key)
        if count + 1 > 8 {
            var keySet = unsafe Set(keys[start...])
            for index in 0..<JSONFirstKeys.capacity { unsafe keySet.insert(innermost.firstKeys[index]) }
            unsafe innermost.keySet = keySet
            unsafe keys.removeSubrange(start...)
        }
        return true
    }

    /// Takes back everything written since `mark`: the bytes, the containers opened, the key.
    func restore(_ mark: Mark) {
        unsafe buffer.moveWriterIndex(to: mark.writerIndex)
        pop(toDepth: mark.depth)
        guard unsafe openCount == mark.depth, mark.depth > 0 else { return }
        unsafe innermost.count = mark.count
        if let key = mark.key {
            // The key was the last one inserted into this object, now the innermost again. One of
            // its first keys is forgotten with the count alone.
            if unsafe innermost.keySet != nil {
                unsafe innermost.keySet?.remove(key)
            } else if mark.count >= JSONFirstKeys.capacity {
                unsafe keys.removeLast()
            }
        }
    }

    /// Takes back the bytes and containers a single value wrote since `writerIndex` at `depth`.
    func restore(writerIndex: Int, depth: Int) {
        unsafe buffer.moveWriterIndex(to: writerIndex)
        pop(toDepth: depth)
    }

    /// Closes every container opened after `id`. Throws when `id` is already closed.
    func activate(_ id: Int) throws {
        if unsafe openCount > 0 && innermost.id == id { return }
        guard unsafe outer.contains(where: { $0.id == id }) else { throw giveUp() }
        while unsafe innermost.id != id {
            unsafe buffer.writeInteger(innermost.closing)
            pop(toDepth: unsafe openCount - 1)
        }
    }

    /// Closes every container opened at or after the depth `depth`.
    func close(toDepth depth: Int) {
        while unsafe openCount > depth {
            unsafe buffer.writeInteger(innermost.closing)
            pop(toDepth: unsafe openCount - 1)
        }
    }

    /// Forgets the containers at `depth` and deeper, and their keys; writes nothing.
    private func pop(toDepth depth: Int) {
        guard unsafe openCount > depth else { return }
        // The frame at `depth`: `innermost` when it is the last one open, else one of `outer`.
        let keysStart = unsafe depth == openCount - 1 ? innermost.keysStart : outer[depth].keysStart
        if unsafe keys.count > keysStart { unsafe keys.removeSubrange(keysStart...) }
        if depth > 0 {
            unsafe innermost = outer[depth - 1]
            unsafe outer.removeSubrange((depth - 1)...)
        } else {
            unsafe outer.removeAll(keepingCapacity: true)
        }
        unsafe openCount = depth
    }
}

/// The first few keys of one object, stored in place: most objects have no more, and then their
/// check for a repeated key needs no array of its own (an allocation on every encode).
struct JSONFirstKeys {
    /// How many keys are kept in place.
    static let capacity = 4

    private var first = "", second = "", third = "", fourth = ""

    /// The key at `index` (below ``capacity``).
    subscript(index: Int) -> String {
        switch index {
        case 0: first
        case 1: second
        case 2: third
        default: fourth
        }
    }

    /// Stores `key` at `index` (below ``capacity``).
    mutating func set(_ key: String, at index: Int) {
        switch index {
        case 0: first = key
        case 1: second = key
        case 2: third = key
        default: fourth = key
        }
    }

    /// Whether `key` is among the first `count` keys stored (compared as Swift strings).
    func contains(_ key: String, among count: Int) -> Bool {
        (count > 0 && first == key) || (count > 1 && second == key) || (count > 2 && third == key) || (count > 3 && fourth == key)
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
        let depth = output.depth
        // One comparison of metatypes first: a struct, array or dictionary (nearly every value
        // here) skips the dynamic casts of `encodeOwn`, each a runtime call.
        if Self.hasOwnEncoding(T.self) {
            try encodeOwn(value)
        } else {
            try encodeComposite(value)
        }
        output.close(toDepth: depth)
    }

    /// Writes a value whose type ``hasOwnEncoding(_:)`` names as `JSONEncoder` writes it.
    private func encodeOwn<T: Encodable>(_ value: T) throws {
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
        default: try encodeComposite(value)
        }
    }

    /// Whether values of `type` are written here rather than by their own `encode(to:)`.
    private static func hasOwnEncoding(_ type: Any.Type) -> Bool {
        type == String.self || type == Int.self || type == Double.self || type == Bool.self
            || type == Data.self || type == Date.self || type == URL.self || type == Decimal.self
    }

    /// Encodes `value` through its own `encode(to:)`, with this slot as its encoder.
    private func encodeComposite<T: Encodable>(_ value: T) throws {
        try value.encode(to: self)
        if container == nil, !wroteValue {
            // Nothing encoded: an empty object, as JSONEncoder writes for nested values.
            unsafe output.buffer.writeStaticString("{}")
            wroteValue = true
        }
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
        guard container == nil, !wroteValue else { throw output.giveUp() }
        try unsafe write(&output.buffer)
        wroteValue = true
    }

    func encodeNil() throws { try writeScalar { $0.writeStaticString("null") } }
    func encode(_ value: Bool) throws { try writeScalar { JSONScalar.writeBool(value, into: &$0) } }
    func encode(_ value: String) throws { try writeScalar { JSONStringWriter.write(value, into: &$0) } }
    func encode(_ value: Double) throws { try floating(value) }
    func encode(_ value: Float) throws { try floating(value) }
    func encode(_ value: Int) throws { try integer(Int64(value)) }
    func encode(_ value: Int8) throws { try integer(Int64(value)) }
    func encode(_ value: Int16) throws { try integer(Int64(value)) }
    func encode(_ value: Int32) throws { try integer(Int64(value)) }
    func encode(_ value: Int64) throws { try integer(value) }
    func encode(_ value: UInt) throws { try integer(UInt64(value)) }
    func encode(_ value: UInt8) throws { try integer(UInt64(value)) }
    func encode(_ value: UInt16) throws { try integer(UInt64(value)) }
    func encode(_ value: UInt32) throws { try integer(UInt64(value)) }
    func encode(_ value: UInt64) throws { try integer(value) }
    func encode<T: Encodable>(_ value: T) throws {
        guard container == nil, !wroteValue else { throw output.giveUp() }
        let writerIndex = unsafe output.buffer.writerIndex
        let depth = output.depth
        do {
            try encodeValue(value)
        } catch {
            output.restore(writerIndex: writerIndex, depth: depth)
            container = nil
            throw error
        }
        wroteValue = true
    }

    // Integers are written through two concrete functions, signed and unsigned: a generic one is
    // not specialised in the containers' own generic code, and then pays a witness call for each
    // arithmetic step.
    private func integer(_ value: Int64) throws { try writeScalar { JSONScalar.writeInteger(value, into: &$0) } }
    private func integer(_ value: UInt64) throws { try writeScalar { JSONScalar.writeInteger(value, into: &$0) } }

    private func floating<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T) throws {
        try writeScalar { try JSONScalar.writeFloatingPoint(value, into: &$0, codingPath: codingPath) }
    }
}

/// How numbers and Booleans are written, whether into a slot of their own or straight into a container.
enum JSONScalar {
    static func writeBool(_ value: Bool, into buffer: inout ByteBuffer) {
        if value { buffer.writeStaticString("true") } else { buffer.writeStaticString("false") }
    }

    /// Writes `value` in decimal, as `String(value)` spells it.
    static func writeInteger(_ value: Int64, into buffer: inout ByteBuffer) {
        writeDecimal(value.magnitude, negative: value < 0, into: &buffer)
    }

    /// Writes `value` in decimal, as `String(value)` spells it.
    static func writeInteger(_ value: UInt64, into buffer: inout ByteBuffer) {
        writeDecimal(value, negative: false, into: &buffer)
    }

    /// Writes `magnitude` in decimal, after a minus sign when `negative`, in one write to the
    /// buffer: the digits go straight into its bytes, without a `String` in between.
    private static func writeDecimal(_ magnitude: UInt64, negative: Bool, into buffer: inout ByteBuffer) {
        var digits = 1
        var rest = magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        let count = digits + (negative ? 1 : 0)
        unsafe buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { output in
            // `output` has room for `count` bytes (`minimumWritableBytes`), and every index
            // written below is under `count`: the sign at 0, the digits from `count - 1` down,
            // one per digit counted above.
            if negative { unsafe output[0] = UInt8(ascii: "-") }
            var index = count
            var rest = magnitude
            repeat {
                index -= 1
                unsafe output[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            return count
        }
    }

    /// Writes `value` as `JSONEncoder` does (no ".0" on whole numbers); non-finite numbers are
    /// refused, as JSON cannot hold them.
    static func writeFloatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(
        _ value: T, into buffer: inout ByteBuffer, codingPath: @autoclosure () -> [any CodingKey]
    ) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath(), debugDescription: "Unable to encode \(T.self).\(value) directly in JSON."))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        buffer.writeString(text)
    }
}

/// Writes `"key":value` members into an open object.
struct JSONKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: JSONSlotEncoder
    let id: Int
    var codingPath: [any CodingKey] { slot.codingPath }

    /// Writes `"key":` and returns what ``JSONOutput/restore(_:)`` needs to take the member back.
    private func beginMember(_ key: Key) throws -> JSONOutput.Mark {
        try slot.output.beginMember(of: id, key: key.stringValue)
    }

    /// Writes `"key":` and returns the slot for its value.
    private func member(_ key: Key) throws -> (slot: JSONSlotEncoder, mark: JSONOutput.Mark) {
        let mark = try beginMember(key)
        return (JSONSlotEncoder(output: slot.output, codingPath: codingPath + [key]), mark)
    }

    /// Writes a member whose value is a scalar straight into the output: no slot of its own (an
    /// object and its coding path each), which is most of the cost of a small member.
    private func encodeScalar(_ key: Key, _ write: (inout ByteBuffer) throws -> Void) throws {
        let output = slot.output
        let mark = try beginMember(key)
        do {
            try unsafe write(&output.buffer)
        } catch {
            output.restore(mark)
            throw error
        }
    }

    /// Encodes one member; when that throws, nothing of it stays in the output.
    private func encodeMember(_ key: Key, _ body: (JSONSlotEncoder) throws -> Void) throws {
        let (member, mark) = try member(key)
        do {
            try body(member)
        } catch {
            slot.output.restore(mark)
            throw error
        }
    }

    mutating func encodeNil(forKey key: Key) throws { try encodeScalar(key) { $0.writeStaticString("null") } }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try encodeScalar(key) { JSONScalar.writeBool(value, into: &$0) } }
    mutating func encode(_ value: String, forKey key: Key) throws { try encodeScalar(key) { JSONStringWriter.write(value, into: &$0) } }
    mutating func encode(_ value: Double, forKey key: Key) throws { try floatingPoint(value, forKey: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try floatingPoint(value, forKey: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(Int64(value), forKey: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(Int64(value), forKey: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(Int64(value), forKey: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(Int64(value), forKey: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, forKey: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(UInt64(value), forKey: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(UInt64(value), forKey: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(UInt64(value), forKey: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(UInt64(value), forKey: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, forKey: key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try encodeMember(key) { try $0.encodeValue(value) } }

    private func integer(_ value: Int64, forKey key: Key) throws { try encodeScalar(key) { JSONScalar.writeInteger(value, into: &$0) } }
    private func integer(_ value: UInt64, forKey key: Key) throws { try encodeScalar(key) { JSONScalar.writeInteger(value, into: &$0) } }

    private func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T, forKey key: Key) throws {
        try encodeScalar(key) { try JSONScalar.writeFloatingPoint(value, into: &$0, codingPath: codingPath + [key]) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        guard let member = try? member(key) else { return KeyedEncodingContainer(JSONKeyedEncodingContainer<NestedKey>(slot: slot, id: -1)) }
        return member.slot.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        guard let member = try? member(key) else { return JSONUnkeyedEncodingContainer(slot: slot, id: -1) }
        return member.slot.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { UnsupportedEncoder(output: slot.output, codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { UnsupportedEncoder(output: slot.output, codingPath: codingPath) }
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

    /// Writes the separator before the next element; returns what ``JSONOutput/restore(_:)``
    /// needs to take it back.
    private mutating func beginElement() throws -> JSONOutput.Mark {
        let mark = try slot.output.beginElement(of: id)
        count += 1
        return mark
    }

    /// Writes the separator and returns the slot for the next element.
    private mutating func element() throws -> (slot: JSONSlotEncoder, mark: JSONOutput.Mark) {
        let index = count
        let mark = try beginElement()
        return (JSONSlotEncoder(output: slot.output, codingPath: codingPath + [JSONIndexKey(intValue: index)]), mark)
    }

    /// Writes an element that is a scalar straight into the output, without a slot of its own
    /// (as ``JSONKeyedEncodingContainer`` writes scalar members).
    private mutating func encodeScalar(_ write: (inout ByteBuffer) throws -> Void) throws {
        let output = slot.output
        let mark = try beginElement()
        do {
            try unsafe write(&output.buffer)
        } catch {
            output.restore(mark)
            count -= 1
            throw error
        }
    }

    /// Encodes one element; when that throws, nothing of it stays in the output.
    private mutating func encodeElement(_ body: (JSONSlotEncoder) throws -> Void) throws {
        let (element, mark) = try element()
        do {
            try body(element)
        } catch {
            slot.output.restore(mark)
            count -= 1
            throw error
        }
    }

    mutating func encodeNil() throws { try encodeScalar { $0.writeStaticString("null") } }
    mutating func encode(_ value: Bool) throws { try encodeScalar { JSONScalar.writeBool(value, into: &$0) } }
    mutating func encode(_ value: String) throws { try encodeScalar { JSONStringWriter.write(value, into: &$0) } }
    mutating func encode(_ value: Double) throws { try floatingPoint(value) }
    mutating func encode(_ value: Float) throws { try floatingPoint(value) }
    mutating func encode(_ value: Int) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try integer(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try integer(value) }
    mutating func encode(_ value: UInt) throws { try integer(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try integer(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try integer(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try integer(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try integer(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        // An array's elements arrive here, generic: `[String]`, `[Int]`, `[Double]` and `[Bool]`
        // are written in place too, after one comparison of metatypes.
        if T.self == String.self, let string = value as? String { return try encode(string) }
        if T.self == Int.self, let int = value as? Int { return try encode(int) }
        if T.self == Double.self, let double = value as? Double { return try encode(double) }
        if T.self == Bool.self, let bool = value as? Bool { return try encode(bool) }
        try encodeElement { try $0.encodeValue(value) }
    }

    private mutating func integer(_ value: Int64) throws { try encodeScalar { JSONScalar.writeInteger(value, into: &$0) } }
    private mutating func integer(_ value: UInt64) throws { try encodeScalar { JSONScalar.writeInteger(value, into: &$0) } }

    private mutating func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T) throws {
        let path = codingPath, index = count
        try encodeScalar { try JSONScalar.writeFloatingPoint(value, into: &$0, codingPath: path + [JSONIndexKey(intValue: index)]) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        guard let element = try? element() else { return KeyedEncodingContainer(JSONKeyedEncodingContainer<NestedKey>(slot: slot, id: -1)) }
        return element.slot.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        guard let element = try? element() else { return JSONUnkeyedEncodingContainer(slot: slot, id: -1) }
        return element.slot.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { UnsupportedEncoder(output: slot.output, codingPath: codingPath) }
}

/// Handed out for `superEncoder()`: asking for it makes ``PayloadEncoder`` fall back to `JSONEncoder`.
struct UnsupportedEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(output: JSONOutput, codingPath: [any CodingKey]) {
        _ = output.giveUp()
        self.codingPath = codingPath
    }

    init(codingPath: [any CodingKey]) {
        self.codingPath = codingPath
    }

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
