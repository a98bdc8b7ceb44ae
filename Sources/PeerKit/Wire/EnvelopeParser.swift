import NIOCore
internal import PeerKitJSON

/// Reads an envelope from a frame body without building a JSON tree.
///
/// One pass with ``JSONReader`` checks that the body is a single JSON object, decodes the string
/// values of `type`, `id`, `replyTo` and `group`, and records where the `payload` value starts and ends.
/// Nested values are checked and skipped; the payload is decoded later, into the registered type,
/// by the handler that wants it. Unknown keys are ignored; of repeated keys the first counts. Every
/// string, read or skipped, must be valid UTF-8. The work is linear in the frame's size.
enum EnvelopeParser {
    /// The deepest nesting accepted anywhere in an envelope.
    static var maximumDepth: Int { JSONReader.maximumDepth }

    private struct Fields {
        var type: String?
        var id: String?
        var replyTo: String?
        var group: String?
        var payload: Range<Int>?
    }

    /// Parses `frame` (the body of one frame, without its length field).
    static func parse(_ frame: ByteBuffer) throws(WireError) -> Envelope {
        if let heartbeat = heartbeat(frame) { return heartbeat }
        return try scanned(frame)
    }

    /// Parses `frame` with the general scan: what ``parse(_:)`` does for any frame but a
    /// heartbeat written as PeerKit writes it (``heartbeat(_:)``).
    static func scanned(_ frame: ByteBuffer) throws(WireError) -> Envelope {
        // A frame shorter than a long string has none to record, and spares the allocation.
        let longStrings = frame.readableBytes >= LongStringEnds.minimumLength ? LongStringEnds() : nil
        let result = frame.withUnsafeReadableBytes { bytes -> Result<Fields, JSONSyntaxError> in
            do throws(JSONSyntaxError) {
                return .success(try scan(JSONReader(bytes: bytes, longStrings: longStrings)))
            } catch {
                return .failure(error)
            }
        }
        let fields: Fields
        switch result {
        case let .success(scanned): fields = scanned
        case let .failure(error): throw .malformedEnvelope(error.reason)
        }
        guard let type = fields.type else { throw .malformedEnvelope("the envelope has no \"type\"") }
        guard !type.isEmpty else { throw .malformedEnvelope("the envelope's \"type\" is empty") }
        guard let range = fields.payload,
              let payload = frame.getSlice(at: frame.readerIndex + range.lowerBound, length: range.count) else {
            throw .malformedEnvelope("the envelope has no \"payload\"")
        }
        return Envelope(type: type, id: fields.id, replyTo: fields.replyTo, group: fields.group, payload: payload, payloadStringEnds: longStrings?.ends(in: range) ?? [Int: Int]())
    }

    // MARK: Heartbeats, as PeerKit writes them

    // Computed, not stored: a stored static is reached through a once-guarded accessor.
    private static var pingHead: StaticString { #"{"type":"peerkit.ping","id":""# }
    private static var pongHead: StaticString { #"{"type":"peerkit.pong","replyTo":""# }
    private static var heartbeatTail: StaticString { #"","payload":{}}"# }
    /// The longest heartbeat frame the shortcut reads: a 32-byte id. PeerKit's are `ping-` and
    /// a count.
    private static var heartbeatMaximumLength: Int { pongHead.utf8CodeUnitCount + 32 + heartbeatTail.utf8CodeUnitCount }

    /// The envelope of a ping or a pong exactly as ``EnvelopeEncoder`` writes them, read without
    /// the general scan; nil for any other frame, which ``parse(_:)`` then scans. An idle link's
    /// only traffic is these two frames, and a node of a 64-node mesh reads one of them per link
    /// per beat on caches the other nodes have just used: the scan's code and tables cost more
    /// there than the frame's few bytes. The id must be plain printable ASCII (no quote, no
    /// backslash), so that its bytes are its value; the result is the envelope the scan gives
    /// for the same bytes (`EnvelopeParserTests` compares them).
    static func heartbeat(_ frame: ByteBuffer) -> Envelope? {
        let length = frame.readableBytes
        guard length <= heartbeatMaximumLength, length >= pingHead.utf8CodeUnitCount + heartbeatTail.utf8CodeUnitCount else { return nil }
        let found = frame.withUnsafeReadableBytes { bytes -> (isPing: Bool, id: String)? in
            func has(_ part: StaticString, at offset: Int) -> Bool {
                offset >= 0 && offset + part.utf8CodeUnitCount <= bytes.count
                    && part.withUTF8Buffer { bytes[offset..<offset + $0.count].elementsEqual($0) }
            }
            let isPing: Bool
            if has(pingHead, at: 0) {
                isPing = true
            } else if has(pongHead, at: 0) {
                isPing = false
            } else {
                return nil
            }
            let idStart = isPing ? pingHead.utf8CodeUnitCount : pongHead.utf8CodeUnitCount
            let idEnd = bytes.count - heartbeatTail.utf8CodeUnitCount
            guard idStart <= idEnd, has(heartbeatTail, at: idEnd) else { return nil }
            let id = UnsafeRawBufferPointer(rebasing: bytes[idStart..<idEnd])
            guard id.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else { return nil }
            return (isPing, String(decoding: id, as: UTF8.self))
        }
        // The payload is the `{}` before the frame's closing brace.
        guard let found,
              let payload = frame.getSlice(at: frame.readerIndex + length - 3, length: 2) else { return nil }
        if found.isPing {
            return Envelope(type: EnvelopeType.ping, id: found.id, payload: payload)
        }
        return Envelope(type: EnvelopeType.pong, replyTo: found.id, payload: payload)
    }

    private static func scan(_ reader: JSONReader) throws(JSONSyntaxError) -> Fields {
        let index = reader.skipWhitespace(from: 0)
        guard reader.byte(at: index) == UInt8(ascii: "{") else {
            throw JSONSyntaxError(reason: index >= reader.bytes.count ? "the frame is empty" : "the envelope is not a JSON object")
        }
        var fields = Fields()
        var members = JSONMemberCursor(objectAt: index, in: reader, truncated: "the envelope ends before its closing brace")
        while let member = try members.next() {
            let valueEnd = try reader.skipValue(at: member.value)
            func stringValue(_ name: String) throws(JSONSyntaxError) -> String {
                guard reader.byte(at: member.value) == UInt8(ascii: "\"") else {
                    throw JSONSyntaxError(reason: "the envelope's \"\(name)\" is not a string")
                }
                return try reader.string(at: member.value)
            }
            // The first of repeated keys counts, as in JSONDecoder (and PayloadDecoder).
            switch EnvelopeField(nameAt: member, in: reader) {
            case .type: if fields.type == nil { fields.type = try stringValue("type") }
            case .id: if fields.id == nil { fields.id = try stringValue("id") }
            case .replyTo: if fields.replyTo == nil { fields.replyTo = try stringValue("replyTo") }
            case .group: if fields.group == nil { fields.group = try stringValue("group") }
            case .payload: if fields.payload == nil { fields.payload = member.value..<valueEnd }
            case nil: break
            }
            try members.valueEnds(at: valueEnd)
        }
        guard reader.skipWhitespace(from: members.end) == reader.bytes.count else {
            throw JSONSyntaxError(reason: "there are bytes after the envelope object")
        }
        return fields
    }
}

/// The envelope's keys that ``EnvelopeParser`` reads.
private enum EnvelopeField: String {
    case type, id, replyTo, group, payload

    /// The key named by `member`, or nil for another name. A name whose bytes are those of a
    /// key is that key (every name PeerKit writes is): it is compared byte by byte with the one
    /// key of its length. Only a name that is none of them is looked at again: when it has
    /// escapes, it is decoded and compared as a string, as `JSONReader.nameMatches(at:end:_:)`
    /// compares such names.
    init?(nameAt member: JSONMemberCursor.Member, in reader: JSONReader) {
        func named(_ name: StaticString) -> Bool {
            reader.plainNameEquals(at: member.nameStart, end: member.nameEnd, name)
        }
        switch member.nameEnd - member.nameStart - 2 {
        case 2 where named("id"): self = .id
        case 4 where named("type"): self = .type
        case 5 where named("group"): self = .group
        case 7 where named("replyTo"): self = .replyTo
        case 7 where named("payload"): self = .payload
        default:
            guard reader.nameHasEscape(at: member.nameStart, end: member.nameEnd),
                  let name = try? reader.string(at: member.nameStart) else { return nil }
            self.init(rawValue: name)
        }
    }
}
