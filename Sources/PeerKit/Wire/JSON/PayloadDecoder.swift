import Foundation
import NIOCore

/// Decodes `Decodable` values straight from payload JSON bytes, without building a tree.
///
/// Foundation's `JSONDecoder` parses the whole document into its own representation first; for the
/// small payloads that dominate peer messaging that costs more than the decoding itself. This
/// decoder reads values where they lie: a keyed container indexes its object's keys once (as byte
/// ranges, no strings made), and each value is parsed when asked for. It follows `JSONDecoder`'s
/// default strategies: `Data` as Base64, `Date` as seconds since 2001 (`deferredToDate`), `URL` as
/// a string, `Decimal` as a number, non-finite numbers refused.
enum PayloadDecoder {
    /// Decodes a `T` from `payload`.
    static func decode<T: Decodable>(_ type: T.Type, from payload: ByteBuffer) throws -> T {
        try payload.withUnsafeReadableBytes { bytes in
            let reader = JSONReader(bytes: bytes)
            let start = reader.skipWhitespace(from: 0)
            let end = try reader.skipValue(at: start, depth: 0)
            guard reader.skipWhitespace(from: end) == bytes.count else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "There are bytes after the payload's JSON value."))
            }
            return try JSONValueDecoder(reader: reader, offset: start, codingPath: []).decodeValue(T.self)
        }
    }
}

/// Reads JSON values at byte offsets. Valid only inside the `withUnsafeReadableBytes` that made it.
struct JSONReader {
    let bytes: UnsafeRawBufferPointer

    static let maximumDepth = 512

    func skipWhitespace(from index: Int) -> Int {
        var index = index
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return index
            }
        }
        return index
    }

    func byte(at index: Int) -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    func corrupted(_ path: [any CodingKey], _ description: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: path, debugDescription: description))
    }

    /// The offset just past the value starting at `index`, checking its structure.
    func skipValue(at index: Int, depth: Int) throws -> Int {
        guard depth <= Self.maximumDepth else { throw corrupted([], "The JSON nests deeper than \(Self.maximumDepth) levels.") }
        guard let first = byte(at: index) else { throw corrupted([], "The JSON ends where a value was expected.") }
        switch first {
        case UInt8(ascii: "\""):
            return try stringEnd(at: index)
        case UInt8(ascii: "{"):
            var index = skipWhitespace(from: index + 1)
            if byte(at: index) == UInt8(ascii: "}") { return index + 1 }
            while true {
                guard byte(at: index) == UInt8(ascii: "\"") else { throw corrupted([], "An object key is not a string at offset \(index).") }
                index = skipWhitespace(from: try stringEnd(at: index))
                guard byte(at: index) == UInt8(ascii: ":") else { throw corrupted([], "Expected ':' at offset \(index).") }
                index = skipWhitespace(from: try skipValue(at: skipWhitespace(from: index + 1), depth: depth + 1))
                switch byte(at: index) {
                case UInt8(ascii: ","): index = skipWhitespace(from: index + 1)
                case UInt8(ascii: "}"): return index + 1
                default: throw corrupted([], "Expected ',' or '}' at offset \(index).")
                }
            }
        case UInt8(ascii: "["):
            var index = skipWhitespace(from: index + 1)
            if byte(at: index) == UInt8(ascii: "]") { return index + 1 }
            while true {
                index = skipWhitespace(from: try skipValue(at: index, depth: depth + 1))
                switch byte(at: index) {
                case UInt8(ascii: ","): index = skipWhitespace(from: index + 1)
                case UInt8(ascii: "]"): return index + 1
                default: throw corrupted([], "Expected ',' or ']' at offset \(index).")
                }
            }
        case UInt8(ascii: "t"): return try literalEnd(at: index, "true")
        case UInt8(ascii: "f"): return try literalEnd(at: index, "false")
        case UInt8(ascii: "n"): return try literalEnd(at: index, "null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try numberEnd(at: index)
        default:
            throw corrupted([], "Unexpected byte 0x\(String(first, radix: 16)) at offset \(index).")
        }
    }

    func literalEnd(at index: Int, _ literal: StaticString) throws -> Int {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw corrupted([], "Invalid literal at offset \(index).") }
        for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] {
            throw corrupted([], "Invalid literal at offset \(index).")
        }
        return index + count
    }

    func numberEnd(at start: Int) throws -> Int {
        var index = start
        func digits() -> Int {
            let from = index
            while let byte = byte(at: index), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
            return index - from
        }
        if byte(at: index) == UInt8(ascii: "-") { index += 1 }
        if byte(at: index) == UInt8(ascii: "0") {
            index += 1
        } else if digits() == 0 {
            throw corrupted([], "A number has no digits at offset \(start).")
        }
        if byte(at: index) == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw corrupted([], "A number has no digits after its decimal point at offset \(start).") }
        }
        if byte(at: index) == UInt8(ascii: "e") || byte(at: index) == UInt8(ascii: "E") {
            index += 1
            if byte(at: index) == UInt8(ascii: "+") || byte(at: index) == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw corrupted([], "A number has no digits in its exponent at offset \(start).") }
        }
        return index
    }

    /// The offset just past the string starting (at its quote) at `index`.
    func stringEnd(at index: Int) throws -> Int {
        var index = index + 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""): return index + 1
            case UInt8(ascii: "\\"): index += 2
            case 0..<0x20: throw corrupted([], "A string contains a raw control character at offset \(index).")
            default: index += 1
            }
        }
        throw corrupted([], "A string is not terminated.")
    }

    /// Decodes the string starting (at its quote) at `index`.
    func string(at index: Int, path: [any CodingKey]) throws -> String {
        let start = index + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") { end += 1 }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            guard let string = String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self) else {
                throw corrupted(path, "A string is not valid UTF-8.")
            }
            return string
        }
        var scalars = Array(bytes[start..<end])
        var cursor = end
        while cursor < bytes.count {
            let byte = bytes[cursor]
            cursor += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let string = String(validating: scalars, as: UTF8.self) else { throw corrupted(path, "A string is not valid UTF-8.") }
                return string
            case UInt8(ascii: "\\"):
                guard let escape = self.byte(at: cursor) else { throw corrupted(path, "A string ends inside an escape.") }
                cursor += 1
                let scalar: Unicode.Scalar
                switch escape {
                case UInt8(ascii: "\""): scalar = "\""
                case UInt8(ascii: "\\"): scalar = "\\"
                case UInt8(ascii: "/"): scalar = "/"
                case UInt8(ascii: "b"): scalar = "\u{08}"
                case UInt8(ascii: "f"): scalar = "\u{0C}"
                case UInt8(ascii: "n"): scalar = "\n"
                case UInt8(ascii: "r"): scalar = "\r"
                case UInt8(ascii: "t"): scalar = "\t"
                case UInt8(ascii: "u"):
                    let high = try hex4(at: cursor, path: path)
                    cursor += 4
                    if (0xD800..<0xDC00).contains(high) {
                        guard self.byte(at: cursor) == UInt8(ascii: "\\"), self.byte(at: cursor + 1) == UInt8(ascii: "u") else {
                            throw corrupted(path, "A string has an unpaired surrogate escape.")
                        }
                        let low = try hex4(at: cursor + 2, path: path)
                        cursor += 6
                        guard (0xDC00..<0xE000).contains(low), let combined = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)) else {
                            throw corrupted(path, "A string has an unpaired surrogate escape.")
                        }
                        scalar = combined
                    } else {
                        guard let single = Unicode.Scalar(high) else { throw corrupted(path, "A string has an unpaired surrogate escape.") }
                        scalar = single
                    }
                default:
                    throw corrupted(path, "A string has an invalid escape.")
                }
                scalars.append(contentsOf: String(Character(scalar)).utf8)
            case 0..<0x20:
                throw corrupted(path, "A string contains a raw control character.")
            default:
                scalars.append(byte)
            }
        }
        throw corrupted(path, "A string is not terminated.")
    }

    private func hex4(at index: Int, path: [any CodingKey]) throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw corrupted(path, "A string ends inside a \\u escape.") }
        var value: UInt32 = 0
        for offset in 0..<4 {
            let byte = bytes[index + offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw corrupted(path, "A \\u escape has a non-hex digit.")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Whether the key at `keyStart` (its opening quote) equals `key`, byte for byte (no escapes).
    func keyMatches(at keyStart: Int, end keyEnd: Int, _ key: String) -> Bool {
        var key = key
        return key.withUTF8 { utf8 in
            guard utf8.count == keyEnd - keyStart - 2 else { return false }
            for offset in 0..<utf8.count where bytes[keyStart + 1 + offset] != utf8[offset] {
                return false
            }
            return true
        }
    }
}
