import NIOCore

/// Writes one JSON object member by member, straight into a buffer: what PeerKit's
/// `PayloadWriter` writes through, for message types that write their own payload rather than
/// through `Encodable`'s containers.
///
/// Names and values are written as ``PayloadEncoder`` writes them (the same string escapes,
/// integers as `String(value)` spells them, floating-point numbers as `JSONEncoder` does, other
/// `Encodable` values by ``PayloadEncoder`` itself), so a type that writes the members its
/// `Encodable` conformance would write, in the same order, gets the same bytes.
///
/// An object may hold each name once. A name written twice is remembered, not written, and
/// ``finish()`` throws: readers disagree on which of two values to take (PeerKit and
/// `JSONDecoder` take the first, others the last).
package struct JSONObjectWriter {
    /// Why a payload could not be written.
    package struct RepeatedKey: Error, CustomStringConvertible {
        package let key: String

        package var description: String {
            "the key \"\(key)\" was written twice, and a payload may hold each key once"
        }
    }

    /// The first names this many are compared in place, without allocating; an object with
    /// more keeps its names in a set.
    private static let inlineNames = 8

    private var buffer: ByteBuffer
    /// How many members are written.
    private var count = 0
    /// Where the first ``inlineNames`` names start and end in ``buffer``, quotes included.
    private var nameStarts = InlineArray<8, Int>(repeating: 0)
    private var nameEnds = InlineArray<8, Int>(repeating: 0)
    /// Every name, once the object has more than ``inlineNames``.
    private var manyNames: Set<String>?
    /// The first name written twice.
    private var repeated: String?

    /// A writer that opens an object after the bytes `buffer` holds.
    package init(appendingTo buffer: consuming ByteBuffer) {
        self.buffer = consume buffer
        self.buffer.writeInteger(UInt8(ascii: "{"))
    }

    /// Closes the object and returns the buffer, no longer referenced here, so that the
    /// caller's next write does not copy it.
    ///
    /// - Throws: ``RepeatedKey`` when a name was written twice.
    package mutating func finish() throws -> ByteBuffer {
        if let repeated { throw RepeatedKey(key: repeated) }
        buffer.writeInteger(UInt8(ascii: "}"))
        defer { buffer = ByteBuffer() }
        return buffer
    }

    // MARK: Members

    package mutating func write(_ value: String, forKey key: StaticString) {
        member(key) { JSONStringWriter.write(value, into: &$0) }
    }

    package mutating func write(_ value: Bool, forKey key: StaticString) {
        member(key) { JSONScalar.writeBool(value, into: &$0) }
    }

    package mutating func write(_ value: Int64, forKey key: StaticString) {
        member(key) { JSONScalar.writeInteger(value, into: &$0) }
    }

    package mutating func write(_ value: UInt64, forKey key: StaticString) {
        member(key) { JSONScalar.writeInteger(value, into: &$0) }
    }

    /// Writes a finite number as `JSONEncoder` does; throws `EncodingError.invalidValue` for
    /// infinities and NaN, which JSON cannot hold, and leaves nothing of the member behind.
    package mutating func write<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T, forKey key: StaticString) throws {
        try member(key) { try JSONScalar.writeFloatingPoint(value, into: &$0, codingPath: [JSONStaticKey(key)]) }
    }

    /// Writes any other `Encodable` value (with ``PayloadEncoder``); a value whose encoding
    /// throws leaves nothing of the member behind.
    package mutating func write<T: Encodable>(_ value: T, forKey key: StaticString) throws {
        try member(key) { buffer in
            do {
                // Into a buffer of its own: the encoder takes its buffer, and would not hand it
                // back when it throws.
                buffer.writeImmutableBuffer(try PayloadEncoder.encode(value))
            } catch let error as EncodingError {
                throw Self.error(error, under: key)
            }
        }
    }

    /// Writes member `key` with `writeValue` writing its value; when `writeValue` throws, takes
    /// back what was written of the member.
    private mutating func member(_ key: StaticString, _ writeValue: (inout ByteBuffer) throws -> Void) rethrows {
        guard let mark = beginMember(key) else { return }
        do {
            try writeValue(&buffer)
        } catch {
            buffer.moveWriterIndex(to: mark.writerIndex)
            throw error
        }
        endMember(mark)
    }

    /// `error`, thrown by a value encoded on its own, with its path starting at `key`, as when the
    /// value is encoded as a member of its object.
    private static func error(_ error: EncodingError, under key: StaticString) -> EncodingError {
        guard case let .invalidValue(value, context) = error else { return error }
        return .invalidValue(value, .init(codingPath: [JSONStaticKey(key)] + context.codingPath,
                                          debugDescription: context.debugDescription, underlyingError: context.underlyingError))
    }

    // MARK: Names

    /// Where a member began, to take it back.
    private struct Mark {
        var writerIndex: Int
        var nameStart: Int
        var nameEnd: Int
    }

    /// Writes `key`'s name with the ',' before it and the ':' after it; nil, with nothing written,
    /// when the name was written before.
    private mutating func beginMember(_ key: StaticString) -> Mark? {
        let writerIndex = buffer.writerIndex
        let nameStart = count > 0 ? writerIndex + 1 : writerIndex
        JSONStringWriter.write(key, into: &buffer, prefix: count > 0 ? "," : "", suffix: ":")
        let mark = Mark(writerIndex: writerIndex, nameStart: nameStart, nameEnd: buffer.writerIndex - 1)
        guard !isRepeated(mark) else {
            if repeated == nil { repeated = key.description }
            buffer.moveWriterIndex(to: writerIndex)
            return nil
        }
        return mark
    }

    /// Records the member begun at `mark` as written.
    private mutating func endMember(_ mark: Mark) {
        if count < Self.inlineNames {
            nameStarts[count] = mark.nameStart
            nameEnds[count] = mark.nameEnd
        } else {
            var names = manyNames ?? Set((0..<Self.inlineNames).map { name(from: nameStarts[$0], to: nameEnds[$0]) })
            manyNames = nil  // so that the insert below does not copy the set
            names.insert(name(from: mark.nameStart, to: mark.nameEnd))
            manyNames = names
        }
        count += 1
    }

    /// Whether the name just written at `mark` is among the names written before. Names are
    /// compared as written: a text has one spelling, escapes included.
    private func isRepeated(_ mark: Mark) -> Bool {
        if let manyNames { return manyNames.contains(name(from: mark.nameStart, to: mark.nameEnd)) }
        let length = mark.nameEnd - mark.nameStart
        for index in 0..<count where nameEnds[index] - nameStarts[index] == length {
            if buffer.getSlice(at: nameStarts[index], length: length) == buffer.getSlice(at: mark.nameStart, length: length) {
                return true
            }
        }
        return false
    }

    /// The name written at `start..<end`, quotes included, as text.
    private func name(from start: Int, to end: Int) -> String {
        buffer.getString(at: start, length: end - start) ?? ""
    }
}
