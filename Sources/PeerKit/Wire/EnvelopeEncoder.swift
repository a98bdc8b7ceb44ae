import NIOCore

/// Writes frames: the length field and the envelope JSON, in one buffer, without re-encoding the payload.
///
/// The payload arrives already encoded (by `JSONEncoder`, once per message however many peers
/// it goes to); the envelope around it is written byte by byte, keys in the order
/// `type`, `id`, `replyTo`, `payload`:
///
///     {"type":"AddItemCommand","id":"r7","payload":{"title":"Milk"}}
enum EnvelopeEncoder {
    /// The frame for an envelope whose payload is the JSON text `payload`.
    static func frame(
        type: String,
        id: String? = nil,
        replyTo: String? = nil,
        payload: some Collection<UInt8>,
        allocator: ByteBufferAllocator = ByteBufferAllocator()
    ) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 4 + 32 + type.utf8.count + payload.count + (id?.utf8.count ?? 0) + (replyTo?.utf8.count ?? 0))
        writeFrame(type: type, id: id, replyTo: replyTo, payload: payload, into: &buffer)
        return buffer
    }

    /// Appends the frame to `buffer`.
    static func writeFrame(type: String, id: String?, replyTo: String?, payload: some Collection<UInt8>, into buffer: inout ByteBuffer) {
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        let bodyStart = buffer.writerIndex
        buffer.writeStaticString("{\"type\":")
        writeJSONString(type, into: &buffer)
        if let id {
            buffer.writeStaticString(",\"id\":")
            writeJSONString(id, into: &buffer)
        }
        if let replyTo {
            buffer.writeStaticString(",\"replyTo\":")
            writeJSONString(replyTo, into: &buffer)
        }
        buffer.writeStaticString(",\"payload\":")
        buffer.writeBytes(payload)
        buffer.writeStaticString("}")
        buffer.setInteger(UInt32(buffer.writerIndex - bodyStart), at: lengthIndex)
    }

    /// Writes `string` as a JSON string literal, escaping what RFC 8259 requires.
    static func writeJSONString(_ string: String, into buffer: inout ByteBuffer) {
        var string = string
        string.withUTF8 { utf8 in
            buffer.writeInteger(UInt8(ascii: "\""))
            // Copy runs that need no escaping in one go; escape the bytes between them.
            let raw = UnsafeRawBufferPointer(utf8)
            var runStart = 0
            while true {
                let index = JSONStringScan.firstSpecialByte(in: raw, from: runStart, to: raw.count)
                guard index < raw.count else { break }
                let byte = raw[index]
                buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[runStart..<index]))
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
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[runStart...]))
            buffer.writeInteger(UInt8(ascii: "\""))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
