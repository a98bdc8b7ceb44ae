import NIOCore

/// Reads an envelope from a frame body without building a JSON tree.
///
/// One pass over the bytes checks that the body is a single JSON object, decodes the string
/// values of `type`, `id` and `replyTo`, and records where the `payload` value starts and ends.
/// Nested values are checked for well-formed structure and skipped; the payload is decoded later,
/// into the registered type, by the handler that wants it. Unknown keys are ignored.
enum EnvelopeParser {
    /// The deepest nesting accepted anywhere in an envelope.
    static let maximumDepth = 512

    /// Parses `frame` (the body of one frame, without its length field).
    static func parse(_ frame: ByteBuffer) throws(WireError) -> Envelope {
        let result: Result<(type: String, id: String?, replyTo: String?, payload: Range<Int>), WireError> =
            frame.withUnsafeReadableBytes { bytes in
                var scanner = JSONScanner(bytes: bytes)
                do throws(WireError) {
                    return .success(try scanner.scanEnvelope())
                } catch {
                    return .failure(error)
                }
            }
        let fields = try result.get()
        // The slice shares the frame's storage.
        guard let payload = frame.getSlice(at: frame.readerIndex + fields.payload.lowerBound, length: fields.payload.count) else {
            throw .malformedEnvelope("the payload lies outside the frame")
        }
        return Envelope(type: fields.type, id: fields.id, replyTo: fields.replyTo, payload: payload)
    }
}

/// A cursor over JSON bytes that validates as it skips.
private struct JSONScanner {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func scanEnvelope() throws(WireError) -> (type: String, id: String?, replyTo: String?, payload: Range<Int>) {
        skipWhitespace()
        guard peek() == UInt8(ascii: "{") else {
            throw .malformedEnvelope(index >= bytes.count ? "the frame is empty" : "the envelope is not a JSON object")
        }
        index += 1
        var type: String?
        var id: String?
        var replyTo: String?
        var payload: Range<Int>?

        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                let key = try readString()
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                skipWhitespace()
                switch key {
                case "type": type = try readStringValue(named: key)
                case "id": id = try readStringValue(named: key)
                case "replyTo": replyTo = try readStringValue(named: key)
                case "payload":
                    let start = index
                    try skipValue(depth: 1)
                    payload = start..<index
                default:
                    try skipValue(depth: 1)
                }
                skipWhitespace()
                guard let next = peek() else { throw .malformedEnvelope("the envelope ends before its closing brace") }
                guard next == UInt8(ascii: "}") || next == UInt8(ascii: ",") else { throw unexpected(next, expecting: "',' or '}'") }
                index += 1
                if next == UInt8(ascii: "}") { break }
            }
        }
        skipWhitespace()
        guard index == bytes.count else {
            throw .malformedEnvelope("there are bytes after the envelope object")
        }
        guard let type else { throw .malformedEnvelope("the envelope has no \"type\"") }
        guard !type.isEmpty else { throw .malformedEnvelope("the envelope's \"type\" is empty") }
        guard let payload else { throw .malformedEnvelope("the envelope has no \"payload\"") }
        return (type, id, replyTo, payload)
    }

    // MARK: Values

    private mutating func readStringValue(named key: String) throws(WireError) -> String {
        guard peek() == UInt8(ascii: "\"") else {
            throw .malformedEnvelope("the envelope's \"\(key)\" is not a string")
        }
        return try readString()
    }

    private mutating func skipValue(depth: Int) throws(WireError) {
        guard depth <= EnvelopeParser.maximumDepth else {
            throw .malformedEnvelope("the JSON nests deeper than \(EnvelopeParser.maximumDepth) levels")
        }
        guard let byte = peek() else { throw .malformedEnvelope("the JSON ends where a value was expected") }
        switch byte {
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "{"):
            index += 1
            skipWhitespace()
            if peek() == UInt8(ascii: "}") { index += 1; return }
            while true {
                skipWhitespace()
                try skipString()
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                skipWhitespace()
                try skipValue(depth: depth + 1)
                skipWhitespace()
                guard let next = peek() else { throw .malformedEnvelope("an object ends before its closing brace") }
                guard next == UInt8(ascii: "}") || next == UInt8(ascii: ",") else { throw unexpected(next, expecting: "',' or '}'") }
                index += 1
                if next == UInt8(ascii: "}") { return }
            }
        case UInt8(ascii: "["):
            index += 1
            skipWhitespace()
            if peek() == UInt8(ascii: "]") { index += 1; return }
            while true {
                skipWhitespace()
                try skipValue(depth: depth + 1)
                skipWhitespace()
                guard let next = peek() else { throw .malformedEnvelope("an array ends before its closing bracket") }
                guard next == UInt8(ascii: "]") || next == UInt8(ascii: ",") else { throw unexpected(next, expecting: "',' or ']'") }
                index += 1
                if next == UInt8(ascii: "]") { return }
            }
        case UInt8(ascii: "t"): try skipLiteral("true")
        case UInt8(ascii: "f"): try skipLiteral("false")
        case UInt8(ascii: "n"): try skipLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try skipNumber()
        default:
            throw unexpected(byte, expecting: "a JSON value")
        }
    }

    private mutating func skipLiteral(_ literal: StaticString) throws(WireError) {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard index + expected.count <= bytes.count,
              zip(bytes[index..<(index + expected.count)], expected).allSatisfy({ $0 == $1 }) else {
            throw .malformedEnvelope("an invalid literal where \(literal) was expected")
        }
        index += expected.count
    }

    private mutating func skipNumber() throws(WireError) {
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let first = peek(), isDigit(first) else { throw .malformedEnvelope("a number has no digits") }
        index += 1
        if first != UInt8(ascii: "0") { while let byte = peek(), isDigit(byte) { index += 1 } }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let byte = peek(), isDigit(byte) else { throw .malformedEnvelope("a number has no digits after its decimal point") }
            while let byte = peek(), isDigit(byte) { index += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let byte = peek(), isDigit(byte) else { throw .malformedEnvelope("a number has no digits in its exponent") }
            while let byte = peek(), isDigit(byte) { index += 1 }
        }
        assert(index > start)
    }

    /// Skips a string, checking escapes and that no raw control character appears.
    private mutating func skipString() throws(WireError) {
        try expect(UInt8(ascii: "\""))
        while let byte = peek() {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return
            case UInt8(ascii: "\\"):
                _ = try readEscape()
            case 0..<0x20:
                throw .malformedEnvelope("a string contains a raw control character")
            default:
                continue
            }
        }
        throw .malformedEnvelope("a string is not terminated")
    }

    /// Reads a string, resolving escapes, and checks that it is valid UTF-8.
    private mutating func readString() throws(WireError) -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        // Fast path: no escapes.
        while let byte = peek(), byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 {
            index += 1
        }
        if peek() == UInt8(ascii: "\"") {
            let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
            index += 1
            guard let string = String(validating: raw, as: UTF8.self) else {
                throw .malformedEnvelope("a string is not valid UTF-8")
            }
            return string
        }
        var decoded = Array(bytes[start..<index])
        while let byte = peek() {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let string = String(validating: decoded, as: UTF8.self) else {
                    throw .malformedEnvelope("a string is not valid UTF-8")
                }
                return string
            case UInt8(ascii: "\\"):
                let scalar = try readEscape()
                decoded.append(contentsOf: String(Character(scalar)).utf8)
            case 0..<0x20:
                throw .malformedEnvelope("a string contains a raw control character")
            default:
                decoded.append(byte)
            }
        }
        throw .malformedEnvelope("a string is not terminated")
    }

    /// Reads the escape after a backslash and returns the scalar it stands for.
    private mutating func readEscape() throws(WireError) -> Unicode.Scalar {
        guard let byte = peek() else { throw .malformedEnvelope("a string ends inside an escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try readHex4()
            if (0xD800..<0xDC00).contains(high) {
                guard peek() == UInt8(ascii: "\\") else { throw .malformedEnvelope("a string has an unpaired surrogate escape") }
                index += 1
                guard peek() == UInt8(ascii: "u") else { throw .malformedEnvelope("a string has an unpaired surrogate escape") }
                index += 1
                let low = try readHex4()
                guard (0xDC00..<0xE000).contains(low),
                      let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)) else {
                    throw .malformedEnvelope("a string has an unpaired surrogate escape")
                }
                return scalar
            }
            guard let scalar = Unicode.Scalar(high) else { throw .malformedEnvelope("a string has an unpaired surrogate escape") }
            return scalar
        default:
            throw .malformedEnvelope("a string has an invalid escape")
        }
    }

    private mutating func readHex4() throws(WireError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = peek() else { throw .malformedEnvelope("a string ends inside a \\u escape") }
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw .malformedEnvelope("a \\u escape has a non-hex digit")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    // MARK: Bytes

    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private mutating func expect(_ byte: UInt8) throws(WireError) {
        guard let actual = peek() else {
            throw .malformedEnvelope("the JSON ends where '\(Character(Unicode.Scalar(byte)))' was expected")
        }
        guard actual == byte else { throw unexpected(actual, expecting: "'\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
            index += 1
        }
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private func unexpected(_ byte: UInt8, expecting: String) -> WireError {
        let shown = (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        return .malformedEnvelope("unexpected \(shown) at offset \(index) where \(expecting) was expected")
    }
}
