import NIOCore

/// Writes frames: the length field and the envelope JSON, in one buffer, without re-encoding the payload.
///
/// The payload arrives already encoded (by `JSONEncoder`, once per message however many peers
/// it goes to); the envelope around it is written byte by byte, keys in the order
/// `type`, `id`, `replyTo`, `group`, `payload`:
///
///     {"type":"AddItemCommand","id":"r7","payload":{"title":"Milk"}}
enum EnvelopeEncoder {
    /// The frame for an envelope whose payload is the JSON text `payload`.
    static func frame(
        type: String,
        id: String? = nil,
        replyTo: String? = nil,
        group: String? = nil,
        payload: some Collection<UInt8>,
        allocator: ByteBufferAllocator = ByteBufferAllocator()
    ) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 4 + 40 + type.utf8.count + payload.count + (id?.utf8.count ?? 0) + (replyTo?.utf8.count ?? 0) + (group?.utf8.count ?? 0))
        writeFrame(type: type, id: id, replyTo: replyTo, group: group, payload: payload, into: &buffer)
        return buffer
    }

    /// Appends the frame to `buffer`.
    static func writeFrame(type: String, id: String?, replyTo: String?, group: String? = nil, payload: some Collection<UInt8>, into buffer: inout ByteBuffer) {
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        let bodyStart = buffer.writerIndex
        buffer.writeStaticString("{\"type\":")
        JSONStringWriter.write(type, into: &buffer)
        if let id {
            buffer.writeStaticString(",\"id\":")
            JSONStringWriter.write(id, into: &buffer)
        }
        if let replyTo {
            buffer.writeStaticString(",\"replyTo\":")
            JSONStringWriter.write(replyTo, into: &buffer)
        }
        if let group {
            buffer.writeStaticString(",\"group\":")
            JSONStringWriter.write(group, into: &buffer)
        }
        buffer.writeStaticString(",\"payload\":")
        buffer.writeBytes(payload)
        buffer.writeStaticString("}")
        buffer.setInteger(UInt32(buffer.writerIndex - bodyStart), at: lengthIndex)
    }
}
