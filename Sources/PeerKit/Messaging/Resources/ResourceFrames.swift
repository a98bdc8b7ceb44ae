import NIOCore
internal import PeerKitJSON

/// The control frames of the `resources` feature (Documentation/Protocol.md, "Feature:
/// resources"). Transfer IDs are chosen by the sending side, unique among its open transfers on
/// the connection; frames of the receiving side name the sender's ID.
///
///     sender                                 receiver
///       │── peerkit.resource.offer ─────────────▶│  transfer, name, size?
///       │◀───────────── peerkit.resource.accept ─│  window, chunk   (or .refuse)
///       │── binary chunk frames ────────────────▶│  at most `window` bytes not yet acked
///       │◀──────────────── peerkit.resource.ack ─│  bytes taken so far
///       │── peerkit.resource.end ───────────────▶│  size, sha256
///       │◀─────────────── peerkit.resource.done ─│  digest checked  (or .refuse)
///
/// Either side may stop a transfer: the sender with `cancel`, the receiver with `refuse`.
enum ResourceFrame {
    static let offer = "peerkit.resource.offer"
    static let accept = "peerkit.resource.accept"
    static let ack = "peerkit.resource.ack"
    static let end = "peerkit.resource.end"
    static let done = "peerkit.resource.done"
    static let cancel = "peerkit.resource.cancel"
    static let refuse = "peerkit.resource.refuse"

    /// The longest resource name, in UTF-8 bytes.
    static let maximumNameLength = 255
    /// The longest reason accepted in `cancel` or `refuse`, in UTF-8 bytes (longer ones are cut).
    static let maximumReasonLength = 1024

    struct Offer: Codable, Sendable, Equatable {
        var transfer: UInt32
        var name: String
        var size: Int64?
    }

    struct Accept: Codable, Sendable, Equatable {
        var transfer: UInt32
        /// Bytes the sender may have sent and not yet seen acknowledged.
        var window: Int
        /// The longest chunk (data bytes of one binary frame) the receiver takes.
        var chunk: Int
    }

    struct Ack: Codable, Sendable, Equatable {
        var transfer: UInt32
        /// Bytes of the transfer the receiver has taken from its window, in total.
        var received: Int64
    }

    struct End: Codable, Sendable, Equatable {
        var transfer: UInt32
        var size: Int64
        /// The SHA-256 digest of all the bytes, in lowercase hex.
        var sha256: String
    }

    struct Done: Codable, Sendable, Equatable {
        var transfer: UInt32
    }

    /// The payload of `cancel` and `refuse`.
    struct Stop: Codable, Sendable, Equatable {
        var transfer: UInt32
        var reason: String
    }

    /// The frame of control `type` with `payload`.
    static func frame(_ type: String, _ payload: some Encodable) -> ByteBuffer {
        // These payloads are plain structs of strings and numbers: encoding cannot fail.
        let json = (try? PayloadEncoder.encode(payload)) ?? ByteBuffer(string: "{}")
        return EnvelopeEncoder.frame(type: type, payload: json.readableBytesView)
    }
}
