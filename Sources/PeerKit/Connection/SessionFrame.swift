import NIOCore
internal import PeerKitJSON

/// The control frames of the `resume` feature (see `Documentation/Protocol.md`, "Feature: resume"),
/// and which frames a session numbers.
///
///     {"type":"peerkit.resume","payload":{"received":1042,"epoch":"…","peerEpoch":"…"}}    first after the hello, both sides
///     {"type":"peerkit.resend","payload":{"from":1043}}        before the first session frame on a connection
///     {"type":"peerkit.ack","payload":{"received":1300}}       cumulative, after 256 KiB or 50 ms
///
/// None of them is numbered; nor are pings, pongs, hellos, byes, renames, group snapshots,
/// connection errors and the `resources` feature's frames, which belong to one connection.
enum SessionFrame: Equatable, Sendable {
    /// What a side says first on each connection: how far it got in which session.
    case resume(Resume)
    /// The number of the next session frame on this connection; each one after it is one more.
    case resend(from: UInt64)
    /// This side received every session frame of the peer's through `received`.
    case ack(received: UInt64)

    /// The payload of `peerkit.resume`.
    ///
    /// The epochs name the session both sides are in, so that a session that ended on one side
    /// only (its resume window ran out first, it hit a limit) is told from one that goes on: a
    /// side draws a new epoch each time it starts a session with the peer, and holds the peer's
    /// from the first resume of the peer's it read in that session. A count is about the session
    /// the two epochs name, and means nothing in another one. A peer that sends no epochs (an
    /// implementation of the protocol before them) is taken at its count, as before.
    struct Resume: Equatable, Sendable, Codable {
        /// How many of the peer's session frames this side received in the session (0 in a new one).
        var received: UInt64
        /// This side's epoch: a random string of 1 to 64 bytes naming its side of the session.
        var epoch: String?
        /// The peer's epoch as this side knows it: nil until a resume of the peer's arrived in the session.
        var peerEpoch: String?

        init(received: UInt64, epoch: String? = nil, peerEpoch: String? = nil) {
            self.received = received
            self.epoch = epoch
            self.peerEpoch = peerEpoch
        }

        /// An epoch's most bytes, as for the hello's `session`.
        static var maximumEpochBytes: Int { Hello.maximumSessionLength }

        /// A new epoch: 64 random bits in 16 hexadecimal digits.
        static func newEpoch() -> String {
            let bits = String(UInt64.random(in: .min ... .max), radix: 16)
            return String(repeating: "0", count: 16 - bits.count) + bits
        }
    }

    /// A resume that names no epochs: how many of the peer's session frames this side received.
    static func resume(received: UInt64) -> SessionFrame { .resume(Resume(received: received)) }

    static let resumeType = "peerkit.resume"
    static let resendType = "peerkit.resend"
    static let ackType = "peerkit.ack"

    private struct Received: Codable { var received: UInt64 }
    private struct From: Codable { var from: UInt64 }

    /// The frame's bytes, length field included.
    func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        switch self {
        case let .resume(resume):
            return Self.frame(type: Self.resumeType, payload: resume, allocator: allocator)
        case let .resend(from):
            return Self.frame(type: Self.resendType, payload: From(from: from), allocator: allocator)
        case let .ack(received):
            return Self.frame(type: Self.ackType, payload: Received(received: received), allocator: allocator)
        }
    }

    private static func frame(type: String, payload: some Encodable, allocator: ByteBufferAllocator) -> ByteBuffer {
        // Unsigned integers and strings cannot fail to encode; the empty object stands in should that change.
        let json = (try? PayloadEncoder.encode(payload, allocator: allocator)) ?? ByteBuffer(string: "{}")
        return EnvelopeEncoder.frame(type: type, payload: json.readableBytesView, allocator: allocator)
    }

    /// The session frame `envelope` is, nil when it is none of them.
    /// - Throws: a sentence fragment when it is one whose payload is not as above (a protocol violation).
    static func parse(_ envelope: Envelope) throws(ConnectionStateMachine.Failure) -> SessionFrame? {
        let frame: SessionFrame
        do {
            switch envelope.type {
            case resumeType: frame = .resume(try envelope.decodePayload(Resume.self))
            case resendType: frame = .resend(from: try envelope.decodePayload(From.self).from)
            case ackType: frame = .ack(received: try envelope.decodePayload(Received.self).received)
            default: return nil
            }
        } catch {
            throw .malformed("its \(envelope.type) payload is not as the resume feature says: \(error)")
        }
        if case let .resume(resume) = frame {
            for epoch in [resume.epoch, resume.peerEpoch].compactMap(\.self) where epoch.isEmpty || epoch.utf8.count > Resume.maximumEpochBytes {
                throw .malformed("its peerkit.resume names an epoch of \(epoch.utf8.count) bytes, and an epoch is 1 to \(Resume.maximumEpochBytes) bytes")
            }
        }
        return frame
    }

    /// Whether a session numbers `envelope`: an application message, request or reply (group
    /// messages included), or a `peerkit.error` that answers a request. Both sides must agree on
    /// this, frame for frame.
    static func isNumbered(_ envelope: Envelope) -> Bool {
        guard envelope.isControl else { return true }
        return envelope.type == EnvelopeType.error && envelope.replyTo != nil
    }
}
