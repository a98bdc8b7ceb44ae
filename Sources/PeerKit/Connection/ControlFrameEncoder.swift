import NIOCore

extension ConnectionStateMachine.ControlFrame {
    /// Pings and pongs: they may overtake queued data, which no other frame may.
    var isHeartbeat: Bool {
        switch self {
        case .ping, .pong: return true
        case .hello, .bye, .error, .rename: return false
        }
    }

    /// The frame's bytes, length field included. Payload keys are written in a fixed order
    /// (the one `Documentation/Protocol.md` shows), discovery info sorted by key.
    func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var payload = allocator.buffer(capacity: 128)
        let type: String
        var id: String?
        var replyTo: String?
        switch self {
        case let .hello(hello):
            type = EnvelopeType.hello
            payload.writeStaticString("{\"protocol\":")
            payload.writeString(String(hello.protocol))
            payload.writeStaticString(",\"peerID\":")
            EnvelopeEncoder.writeJSONString(hello.peerID, into: &payload)
            payload.writeStaticString(",\"name\":")
            EnvelopeEncoder.writeJSONString(hello.name, into: &payload)
            payload.writeStaticString(",\"serviceType\":")
            EnvelopeEncoder.writeJSONString(hello.serviceType, into: &payload)
            if let info = hello.discoveryInfo, !info.isEmpty {
                payload.writeStaticString(",\"discoveryInfo\":{")
                for (index, key) in info.keys.sorted().enumerated() {
                    if index > 0 { payload.writeStaticString(",") }
                    EnvelopeEncoder.writeJSONString(key, into: &payload)
                    payload.writeStaticString(":")
                    EnvelopeEncoder.writeJSONString(info[key] ?? "", into: &payload)
                }
                payload.writeStaticString("}")
            }
            if let features = hello.features, !features.isEmpty {
                payload.writeStaticString(",\"features\":[")
                for (index, feature) in features.enumerated() {
                    if index > 0 { payload.writeStaticString(",") }
                    EnvelopeEncoder.writeJSONString(feature, into: &payload)
                }
                payload.writeStaticString("]")
            }
            payload.writeStaticString("}")
        case let .ping(pingID):
            type = EnvelopeType.ping
            id = pingID
            payload.writeStaticString("{}")
        case let .pong(answered):
            type = EnvelopeType.pong
            replyTo = answered
            payload.writeStaticString("{}")
        case let .bye(reason):
            type = EnvelopeType.bye
            if let reason {
                payload.writeStaticString("{\"reason\":")
                EnvelopeEncoder.writeJSONString(reason, into: &payload)
                payload.writeStaticString("}")
            } else {
                payload.writeStaticString("{}")
            }
        case let .rename(name):
            type = EnvelopeType.rename
            payload.writeStaticString("{\"name\":")
            EnvelopeEncoder.writeJSONString(name, into: &payload)
            payload.writeStaticString("}")
        case let .error(reason, answered):
            type = EnvelopeType.error
            replyTo = answered
            payload.writeStaticString("{\"reason\":")
            EnvelopeEncoder.writeJSONString(reason, into: &payload)
            payload.writeStaticString("}")
        }
        return EnvelopeEncoder.frame(type: type, id: id, replyTo: replyTo, payload: payload.readableBytesView, allocator: allocator)
    }
}
