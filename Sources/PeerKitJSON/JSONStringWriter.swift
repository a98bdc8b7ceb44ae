import NIOCore

/// Writes Swift strings as JSON string literals: the one string writer of PeerKit's JSON codec,
/// used by ``PayloadEncoder`` for payloads and by ``EnvelopeEncoder`` for the envelope's keys.
/// It lives with the JSON helpers (as ``JSONStringScan`` does), so the envelope code depends on
/// them and they depend on nothing of the envelope's.
package enum JSONStringWriter {
    /// Writes `string` as a JSON string literal, escaping what RFC 8259 requires.
    package static func write(_ string: String, into buffer: inout ByteBuffer) {
        var string = string
        string.withUTF8 { utf8 in
            buffer.writeInteger(UInt8(ascii: "\""))
            // Copy runs that need no escaping in one go; escape the bytes between them.
            let raw = UnsafeRawBufferPointer(utf8)
            var runStart = 0
            while true {
                let index = unsafe JSONStringScan.firstSpecialByte(in: raw, from: runStart, to: raw.count)
                guard index < raw.count else { break }
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
            }
            unsafe buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[runStart...]))
            buffer.writeInteger(UInt8(ascii: "\""))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
