import NIOCore
internal import PeerKitJSON

/// The control frames of the `resume` feature (see `Documentation/Protocol.md`, "Feature: resume"),
/// and which frames a session numbers.
///
///     {"type":"peerkit.resume","payload":{"received":1042}}    first after the hello, both sides
///     {"type":"peerkit.resend","payload":{"from":1043}}        before the first session frame on a connection
///     {"type":"peerkit.ack","payload":{"received":1300}}       cumulative, after 256 KiB or 50 ms
///
/// None of them is numbered; nor are pings, pongs, hellos, byes, renames, group snapshots,
/// connection errors and the `resources` feature's frames, which belong to one connection.
enum SessionFrame: Equatable, Sendable {
    /// How many of the peer's session frames this side received in the session (0 in a new one).
    case resume(received: UInt64)
    /// The number of the next session frame on this connection; each one after it is one more.
    case resend(from: UInt64)
    /// This side received every session frame of the peer's through `received`.
    case ack(received: UInt64)

    static let resumeType = "peerkit.resume"
    static let resendType = "peerkit.resend"
    static let ackType = "peerkit.ack"

    private struct Received: Codable { var received: UInt64 }
    private struct From: Codable { var from: UInt64 }

    /// The frame's bytes, length field included.
    func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        switch self {
        case let .resume(received):
            return Self.frame(type: Self.resumeType, payload: Received(received: received), allocator: allocator)
        case let .resend(from):
            return Self.frame(type: Self.resendType, payload: From(from: from), allocator: allocator)
        case let .ack(received):
            return Self.frame(type: Self.ackType, payload: Received(received: received), allocator: allocator)
        }
    }

    private static func frame(type: String, payload: some Encodable, allocator: ByteBufferAllocator) -> ByteBuffer {
        // Two unsigned integers cannot fail to encode; the empty object stands in should that change.
        let json = (try? PayloadEncoder.encode(payload, allocator: allocator)) ?? ByteBuffer(string: "{}")
        return EnvelopeEncoder.frame(type: type, payload: json.readableBytesView, allocator: allocator)
    }

    /// The session frame `envelope` is, nil when it is none of them.
    /// - Throws: a sentence fragment when it is one whose payload is not as above (a protocol violation).
    static func parse(_ envelope: Envelope) throws(ConnectionStateMachine.Failure) -> SessionFrame? {
        do {
            switch envelope.type {
            case resumeType: return .resume(received: try envelope.decodePayload(Received.self).received)
            case resendType: return .resend(from: try envelope.decodePayload(From.self).from)
            case ackType: return .ack(received: try envelope.decodePayload(Received.self).received)
            default: return nil
            }
        } catch {
            throw .malformed("its \(envelope.type) payload is not as the resume feature says: \(error)")
        }
    }

    /// Whether a session numbers `envelope`: an application message, request or reply (group
    /// messages included), or a `peerkit.error` that answers a request. Both sides must agree on
    /// this, frame for frame.
    static func isNumbered(_ envelope: Envelope) -> Bool {
        guard envelope.type.hasPrefix(EnvelopeType.reservedPrefix) else { return true }
        return envelope.type == EnvelopeType.error && envelope.replyTo != nil
    }
}
