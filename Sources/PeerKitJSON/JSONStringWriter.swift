import NIOCore

/// Writes Swift strings as JSON string literals: the one string writer of PeerKit's JSON codec,
/// used by ``PayloadEncoder`` for payloads and by ``EnvelopeEncoder`` for the envelope's keys.
/// It lives with the JSON helpers (as ``JSONStringScan`` does), so the envelope code depends on
/// them and they depend on nothing of the envelope's.
package enum JSONStringWriter {
    /// Writes `string` as a JSON string literal, escaping what RFC 8259 requires.
    package static func write(_ string: String, into buffer: inout ByteBuffer) {
        write(string, into: &buffer, prefix: "", suffix: "")
    }

    /// Writes `prefix`, `string` as a JSON string literal (escaping what RFC 8259 requires), then
    /// `suffix`: for example a member's name with the ',' before it and the ':' after it.
    ///
    /// A string that needs no escaping (nearly every key and most values) is written with the
    /// punctuation around it in one write to the buffer: each `ByteBuffer` write checks the
    /// buffer's uniqueness, its capacity and (in NIO's own code) exclusive access to its storage,
    /// which cost more than copying a short string's bytes.
    package static func write(_ string: String, into buffer: inout ByteBuffer, prefix: StaticString, suffix: StaticString) {
        var string = string
        string.withUTF8 { utf8 in
            unsafe write(UnsafeRawBufferPointer(utf8), into: &buffer, prefix: prefix, suffix: suffix)
        }
    }

    /// Writes `prefix`, the text `string` as a JSON string literal, then `suffix`: for a name
    /// spelt in the source, such as a member's key.
    package static func write(_ string: StaticString, into buffer: inout ByteBuffer, prefix: StaticString, suffix: StaticString) {
        string.withUTF8Buffer { utf8 in
            unsafe write(UnsafeRawBufferPointer(utf8), into: &buffer, prefix: prefix, suffix: suffix)
        }
    }

    /// Writes `prefix`, the UTF-8 text `raw` as a JSON string literal, then `suffix`.
    private static func write(_ raw: UnsafeRawBufferPointer, into buffer: inout ByteBuffer, prefix: StaticString, suffix: StaticString) {
        let firstSpecial = unsafe JSONStringScan.firstSpecialByte(in: raw, from: 0, to: raw.count)
        if firstSpecial == raw.count {
            unsafe writePlain(raw, into: &buffer, prefix: prefix, suffix: suffix)
        } else {
            unsafe writeEscaped(raw, firstSpecial: firstSpecial, into: &buffer, prefix: prefix, suffix: suffix)
        }
    }

    /// Writes `prefix`, `"`, `raw` (which needs no escaping), `"` and `suffix`, in one write.
    private static func writePlain(_ raw: UnsafeRawBufferPointer, into buffer: inout ByteBuffer, prefix: StaticString, suffix: StaticString) {
        let prefixCount = prefix.utf8CodeUnitCount
        let suffixCount = suffix.utf8CodeUnitCount
        let total = prefixCount + raw.count + suffixCount + 2
        unsafe buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { output in
            // `output` has room for `total` bytes (`minimumWritableBytes`), and the five parts
            // copied below, one after another from index 0, add up to exactly `total`.
            var index = 0
            prefix.withUTF8Buffer { bytes in
                unsafe UnsafeMutableRawBufferPointer(rebasing: output[index..<(index + prefixCount)]).copyMemory(from: UnsafeRawBufferPointer(bytes))
            }
            index += prefixCount
            unsafe output[index] = UInt8(ascii: "\"")
            index += 1
            unsafe UnsafeMutableRawBufferPointer(rebasing: output[index..<(index + raw.count)]).copyMemory(from: raw)
            index += raw.count
            unsafe output[index] = UInt8(ascii: "\"")
            index += 1
            suffix.withUTF8Buffer { bytes in
                unsafe UnsafeMutableRawBufferPointer(rebasing: output[index..<(index + suffixCount)]).copyMemory(from: UnsafeRawBufferPointer(bytes))
            }
            return total
        }
    }

    /// Writes `prefix`, `raw` as a string literal whose first byte to escape is at `firstSpecial`,
    /// and `suffix`: runs that need no escaping are copied in one go, the bytes between escaped.
    private static func writeEscaped(_ raw: UnsafeRawBufferPointer, firstSpecial: Int, into buffer: inout ByteBuffer, prefix: StaticString, suffix: StaticString) {
        buffer.writeStaticString(prefix)
        buffer.writeInteger(UInt8(ascii: "\""))
        var runStart = 0
        var index = firstSpecial
        while index < raw.count {
            let byte = unsafe raw[index]
            unsafe buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[runStart..<index]))
            runStart = index + 1
            switch byte {
            case UInt8(ascii: "\""): buffer.writeStaticString("\\\"")
            case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
            case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
            case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
            case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
            default:
                buffer.writeStaticString("\\u00")
                buffer.writeInteger(hexDigit(byte >> 4))
                buffer.writeInteger(hexDigit(byte & 0xF))
            }
            index = unsafe JSONStringScan.firstSpecialByte(in: raw, from: runStart, to: raw.count)
        }
        unsafe buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[runStart...]))
        buffer.writeInteger(UInt8(ascii: "\""))
        buffer.writeStaticString(suffix)
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
