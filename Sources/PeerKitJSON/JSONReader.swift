#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A JSON syntax problem: `reason` is a sentence fragment such as
/// "unexpected ']' at offset 12 where a JSON value was expected".
package struct JSONSyntaxError: Error, Hashable {
    package var reason: String

    package init(reason: String) {
        self.reason = reason
    }
}

/// Reads JSON at byte offsets: skips and checks values, decodes strings, compares keys.
///
/// The one JSON scanner of PeerKit, shared by ``EnvelopeParser`` (which finds the envelope's keys
/// and the payload's extent) and ``PayloadDecoder`` (which decodes payloads in place). Valid only
/// inside the `withUnsafeReadableBytes` call that made it.
///
/// `@safe`: every read is at an offset checked against `bytes.count` first (each `unsafe` below
/// is such a read), and readers live only inside the `withUnsafeReadableBytes` calls of
/// ``PayloadDecoder`` and ``EnvelopeParser``, which return decoded values, never a reader or a
/// decoder holding one.
@safe
package struct JSONReader {
    package let bytes: UnsafeRawBufferPointer
    /// When set, ``stringEnd(at:)`` records here where each long string ends, so that a later
    /// reader of the same bytes need not scan it again (see ``EnvelopeParser``).
    package var longStrings: LongStringEnds?
    /// When set, ``skipValue(at:depth:)`` records here where each object and array ends, so that
    /// a document indexes its containers with the walk that checks them (see ``JSONDocument``).
    var containerEnds: JSONContainerEnds?

    package init(bytes: UnsafeRawBufferPointer, longStrings: LongStringEnds? = nil) {
        unsafe self.bytes = bytes
        self.longStrings = longStrings
    }

    /// The deepest nesting accepted.
    package static let maximumDepth = 512

    @inlinable
    package func byte(at index: Int) -> UInt8? {
        unsafe index < bytes.count ? bytes[index] : nil
    }

    @inlinable
    package func skipWhitespace(from index: Int) -> Int {
        var index = index
        while unsafe index < bytes.count {
            switch unsafe bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return index
            }
        }
        return index
    }

    /// The offset just past the value starting at `index`, checking its syntax.
    package func skipValue(at index: Int, depth: Int = 1) throws(JSONSyntaxError) -> Int {
        guard depth <= Self.maximumDepth else {
            throw JSONSyntaxError(reason: "the JSON nests deeper than \(Self.maximumDepth) levels")
        }
        guard let first = byte(at: index) else { throw JSONSyntaxError(reason: "the JSON ends where a value was expected") }
        switch first {
        case UInt8(ascii: "\""):
            return try stringEnd(at: index)
        case UInt8(ascii: "{"):
            var members = JSONMemberCursor(objectAt: index, in: self)
            while let member = try members.next() {
                try members.valueEnds(at: try skipValue(at: member.value, depth: depth + 1))
            }
            containerEnds?.record(start: index, end: members.end)
            return members.end
        case UInt8(ascii: "["):
            let end = try arrayEnd(at: index, depth: depth)
            containerEnds?.record(start: index, end: end)
            return end
        case UInt8(ascii: "t"): return try literalEnd(at: index, "true")
        case UInt8(ascii: "f"): return try literalEnd(at: index, "false")
        case UInt8(ascii: "n"): return try literalEnd(at: index, "null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try numberEnd(at: index)
        default:
            throw unexpected(at: index, expecting: "a JSON value")
        }
    }

    /// The offset just past the array whose opening bracket is at `bracket`, checking its elements.
    private func arrayEnd(at bracket: Int, depth: Int) throws(JSONSyntaxError) -> Int {
        var index = skipWhitespace(from: bracket + 1)
        if byte(at: index) == UInt8(ascii: "]") { return index + 1 }
        while true {
            index = skipWhitespace(from: try skipValue(at: index, depth: depth + 1))
            guard let next = byte(at: index) else { throw JSONSyntaxError(reason: "an array ends before its closing bracket") }
            guard next == UInt8(ascii: ",") || next == UInt8(ascii: "]") else { throw unexpected(at: index, expecting: "',' or ']'") }
            if next == UInt8(ascii: "]") { return index + 1 }
            index = skipWhitespace(from: index + 1)
        }
    }

    func literalEnd(at index: Int, _ literal: StaticString) throws(JSONSyntaxError) -> Int {
        let count = literal.utf8CodeUnitCount
        guard unsafe index + count <= bytes.count, (0..<count).allSatisfy({ unsafe bytes[index + $0] == literal.utf8Start[$0] }) else {
            throw JSONSyntaxError(reason: "an invalid literal where \(literal) was expected")
        }
        return index + count
    }

    func numberEnd(at start: Int) throws(JSONSyntaxError) -> Int {
        var index = start
        func skipDigits() -> Int {
            let from = index
            while let byte = byte(at: index), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
            return index - from
        }
        if byte(at: index) == UInt8(ascii: "-") { index += 1 }
        if byte(at: index) == UInt8(ascii: "0") {
            index += 1
        } else if skipDigits() == 0 {
            throw JSONSyntaxError(reason: "a number has no digits")
        }
        if byte(at: index) == UInt8(ascii: ".") {
            index += 1
            guard skipDigits() > 0 else { throw JSONSyntaxError(reason: "a number has no digits after its decimal point") }
        }
        if byte(at: index) == UInt8(ascii: "e") || byte(at: index) == UInt8(ascii: "E") {
            index += 1
            if byte(at: index) == UInt8(ascii: "+") || byte(at: index) == UInt8(ascii: "-") { index += 1 }
            guard skipDigits() > 0 else { throw JSONSyntaxError(reason: "a number has no digits in its exponent") }
        }
        return index
    }

    /// The offset just past the string whose opening quote is at `index`, checking its escapes
    /// and that its text is valid UTF-8 (so a string that is only skipped is checked too).
    func stringEnd(at start: Int) throws(JSONSyntaxError) -> Int {
        var index = start + 1
        while true {
            index = unsafe JSONStringScan.firstSpecialOrNonASCIIByte(in: bytes, from: index, to: bytes.count)
            guard let byte = byte(at: index) else { throw JSONSyntaxError(reason: "a string is not terminated") }
            switch byte {
            case UInt8(ascii: "\""):
                if let longStrings { longStrings.record(start: start, end: index + 1) }
                return index + 1
            case UInt8(ascii: "\\"):
                index = try escapeEnd(at: index + 1)
            case 0x80...:
                index = try utf8SequenceEnd(at: index)
            default:
                throw JSONSyntaxError(reason: "a string contains a raw control character (byte 0x\(String(byte, radix: 16)) at offset \(index))")
            }
        }
    }

    /// The offset just past the multi-byte UTF-8 sequence whose lead byte is at `index`, or an
    /// error when it is not one (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
    func utf8SequenceEnd(at index: Int) throws(JSONSyntaxError) -> Int {
        let lead = unsafe bytes[index]
        // The continuation bytes needed, and the range the first of them must be in.
        let count: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: count = 1
        case 0xE0: count = 2; second = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: count = 2
        case 0xED: count = 2; second = 0x80...0x9F
        case 0xF0: count = 3; second = 0x90...0xBF
        case 0xF1...0xF3: count = 3
        case 0xF4: count = 3; second = 0x80...0x8F
        default: throw invalidUTF8(at: index)
        }
        guard unsafe index + count < bytes.count else { throw invalidUTF8(at: index) }
        guard unsafe second.contains(bytes[index + 1]) else { throw invalidUTF8(at: index) }
        for offset in stride(from: 2, through: count, by: 1) where unsafe bytes[index + offset] & 0xC0 != 0x80 {
            throw invalidUTF8(at: index)
        }
        return index + count + 1
    }

    private func invalidUTF8(at index: Int) -> JSONSyntaxError {
        JSONSyntaxError(reason: unsafe "a string is not valid UTF-8 (byte 0x\(String(bytes[index], radix: 16)) at offset \(index) does not start a valid sequence)")
    }

    /// Decodes the string whose opening quote is at `index`, resolving escapes and checking UTF-8.
    package func string(at index: Int) throws(JSONSyntaxError) -> String {
        let start = index + 1
        // One pass over the plain ASCII text: a string that is nothing else (the common case, and
        // every Base64 string) is made from its bytes at once, with no second look at them.
        let stop = unsafe JSONStringScan.firstSpecialOrNonASCIIByte(in: bytes, from: start, to: bytes.count)
        if byte(at: stop) == UInt8(ascii: "\"") {
            return unsafe UTF8Text.string(ascii: UnsafeRawBufferPointer(rebasing: bytes[start..<stop]))
        }
        let end = unsafe JSONStringScan.firstSpecialByte(in: bytes, from: stop, to: bytes.count)
        if byte(at: end) == UInt8(ascii: "\"") {
            guard let string = unsafe UTF8Text.string(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) else {
                throw JSONSyntaxError(reason: "a string is not valid UTF-8")
            }
            return string
        }
        var decoded = unsafe Array(bytes[start..<end])
        var cursor = end
        while let byte = byte(at: cursor) {
            switch byte {
            case UInt8(ascii: "\""):
                guard let string = UTF8Text.string(decoded) else { throw JSONSyntaxError(reason: "a string is not valid UTF-8") }
                return string
            case UInt8(ascii: "\\"):
                let (scalar, next) = try escape(at: cursor + 1)
                decoded.append(contentsOf: String(Character(scalar)).utf8)
                cursor = next
            case 0..<0x20:
                throw JSONSyntaxError(reason: "a string contains a raw control character")
            default:
                decoded.append(byte)
                cursor += 1
            }
        }
        throw JSONSyntaxError(reason: "a string is not terminated")
    }

    /// Decodes the string whose opening quote is at `start` and which ends just before `end`, as
    /// found by ``stringEnd(at:)``, which checked its escapes and its UTF-8. Without escapes, the
    /// text between the quotes is the string, and it is made without scanning it again for them
    /// (`memchr` looks for a backslash many bytes at a time) and without a second UTF-8 check of
    /// our own (`String(decoding:as:)` has its own, fast for ASCII, and could only repair, never trap).
    func string(at start: Int, end: Int) throws(JSONSyntaxError) -> String {
        let text = unsafe UnsafeRawBufferPointer(rebasing: bytes[(start + 1)..<(end - 1)])
        guard unsafe !Self.containsBackslash(text) else { return try string(at: start) }
        return unsafe String(decoding: text, as: UTF8.self)
    }

    /// Whether `text` holds a backslash, looking many bytes at a time.
    static func containsBackslash(_ text: UnsafeRawBufferPointer) -> Bool {
        guard let base = text.baseAddress else { return false }
        return unsafe memchr(base, Int32(UInt8(ascii: "\\")), text.count) != nil
    }

    /// Whether the member name whose quote is at `keyStart` (ending at `keyEnd`, past its closing
    /// quote) is `name`, comparing bytes; names with escapes are decoded first.
    package func nameMatches(at keyStart: Int, end keyEnd: Int, _ name: String) -> Bool {
        let raw = unsafe UnsafeRawBufferPointer(rebasing: bytes[(keyStart + 1)..<(keyEnd - 1)])
        if unsafe raw.contains(UInt8(ascii: "\\")) {
            return (try? string(at: keyStart)) == name
        }
        var name = name
        return name.withUTF8 { utf8 in unsafe utf8.elementsEqual(raw) }
    }

    /// Whether the member name whose quote is at `keyStart` (ending at `keyEnd`, past its closing
    /// quote) is spelt with an escape, so that its text is not its bytes.
    package func nameHasEscape(at keyStart: Int, end keyEnd: Int) -> Bool {
        unsafe Self.containsBackslash(UnsafeRawBufferPointer(rebasing: bytes[(keyStart + 1)..<(keyEnd - 1)]))
    }

    /// Whether the bytes of the member name whose quote is at `keyStart` (ending at `keyEnd`, past
    /// its closing quote) are those of `name`: for a name without escapes, whether it is `name`,
    /// compared byte by byte as ``nameMatches(at:end:_:)`` compares such names.
    package func plainNameEquals(at keyStart: Int, end keyEnd: Int, _ name: StaticString) -> Bool {
        let count = keyEnd - keyStart - 2
        guard count == name.utf8CodeUnitCount, keyStart >= 0, unsafe keyEnd <= bytes.count else { return false }
        // A few bytes: compared one by one, inline, rather than through a generic comparison.
        let first = keyStart + 1
        for offset in 0..<count where unsafe bytes[first + offset] != name.utf8Start[offset] {
            return false
        }
        return true
    }

    func unexpected(at index: Int, expecting: String) -> JSONSyntaxError {
        let shown = byte(at: index).map { byte in
            (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        } ?? "the end"
        return JSONSyntaxError(reason: "unexpected \(shown) at offset \(index) where \(expecting) was expected")
    }

    // MARK: Escapes

    private func escapeEnd(at index: Int) throws(JSONSyntaxError) -> Int {
        try escape(at: index).next
    }

    /// The scalar an escape stands for (`index` is just past the backslash) and where it ends.
    private func escape(at index: Int) throws(JSONSyntaxError) -> (scalar: Unicode.Scalar, next: Int) {
        guard let escaped = byte(at: index) else { throw JSONSyntaxError(reason: "a string ends inside an escape") }
        switch escaped {
        case UInt8(ascii: "\""): return ("\"", index + 1)
        case UInt8(ascii: "\\"): return ("\\", index + 1)
        case UInt8(ascii: "/"): return ("/", index + 1)
        case UInt8(ascii: "b"): return ("\u{08}", index + 1)
        case UInt8(ascii: "f"): return ("\u{0C}", index + 1)
        case UInt8(ascii: "n"): return ("\n", index + 1)
        case UInt8(ascii: "r"): return ("\r", index + 1)
        case UInt8(ascii: "t"): return ("\t", index + 1)
        case UInt8(ascii: "u"):
            let high = try hex4(at: index + 1)
            guard (0xD800..<0xE000).contains(high) else {
                // Not a surrogate, so always a scalar.
                return (Unicode.Scalar(high) ?? "\u{FFFD}", index + 5)
            }
            guard high < 0xDC00, byte(at: index + 5) == UInt8(ascii: "\\"), byte(at: index + 6) == UInt8(ascii: "u") else {
                throw JSONSyntaxError(reason: "a string has an unpaired surrogate escape")
            }
            let low = try hex4(at: index + 7)
            guard (0xDC00..<0xE000).contains(low), let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)) else {
                throw JSONSyntaxError(reason: "a string has an unpaired surrogate escape")
            }
            return (scalar, index + 11)
        default:
            throw JSONSyntaxError(reason: "a string has an invalid escape")
        }
    }

    private func hex4(at index: Int) throws(JSONSyntaxError) -> UInt32 {
        guard unsafe index + 4 <= bytes.count else { throw JSONSyntaxError(reason: "a string ends inside a \\u escape") }
        var value: UInt32 = 0
        for offset in 0..<4 {
            let byte = unsafe bytes[index + offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONSyntaxError(reason: "a \\u escape has a non-hex digit")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}
