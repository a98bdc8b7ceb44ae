import NIOCore
internal import PeerKitJSON

/// Writes frames: the length field and the envelope JSON, in one buffer, without re-encoding the payload.
///
/// The payload arrives already encoded (by PeerKit's own ``PayloadEncoder``, once per message
/// however many peers it goes to; it falls back to Foundation's `JSONEncoder` only for an
/// `encode(to:)` it cannot stream); the envelope around it is written byte by byte, keys in the order
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
        let lengthIndex = writeHead(type: type, id: id, replyTo: replyTo, group: group, into: &buffer)
        buffer.writeBytes(payload)
        writeTail(lengthIndex: lengthIndex, into: &buffer)
    }

    /// Appends the length field and the envelope up to its payload (`…,"payload":`), for a payload
    /// written straight after it; returns where the length field is, for ``writeTail(lengthIndex:into:)``.
    static func writeHead(type: String, id: String?, replyTo: String?, group: String? = nil, into buffer: inout ByteBuffer) -> Int {
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        // Each string value is written with its key and the punctuation around it in one write
        // (see `JSONStringWriter.write(_:into:prefix:suffix:)`); the head of a plain envelope,
        // with neither `id`, `replyTo` nor `group`, takes two writes in all.
        guard id != nil || replyTo != nil || group != nil else {
            JSONStringWriter.write(type, into: &buffer, prefix: "{\"type\":", suffix: ",\"payload\":")
            return lengthIndex
        }
        JSONStringWriter.write(type, into: &buffer, prefix: "{\"type\":", suffix: "")
        if let id {
            JSONStringWriter.write(id, into: &buffer, prefix: ",\"id\":", suffix: "")
        }
        if let replyTo {
            JSONStringWriter.write(replyTo, into: &buffer, prefix: ",\"replyTo\":", suffix: "")
        }
        if let group {
            JSONStringWriter.write(group, into: &buffer, prefix: ",\"group\":", suffix: "")
        }
        buffer.writeStaticString(",\"payload\":")
        return lengthIndex
    }

    /// Closes the envelope after its payload and fills in the length field written by
    /// ``writeHead(type:id:replyTo:group:into:)`` at `lengthIndex`.
    static func writeTail(lengthIndex: Int, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("}")
        buffer.setInteger(UInt32(buffer.writerIndex - lengthIndex - 4), at: lengthIndex)
    }
}
