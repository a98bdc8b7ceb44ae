import NIOCore

/// One decoded frame: the envelope around a message.
///
/// `payload` holds the raw JSON bytes of the `"payload"` value, a slice of the frame (no copy);
/// it is decoded into a Swift type only by the handler that wants it.
struct Envelope: Sendable, Equatable {
    /// The wire key (`"type"`).
    var type: String
    /// Set when the sender expects a reply.
    var id: String?
    /// The `id` this message answers.
    var replyTo: String?
    /// The JSON text of the payload value.
    var payload: ByteBuffer

    /// Whether the type is reserved for the protocol itself.
    var isControl: Bool { type.hasPrefix(EnvelopeType.reservedPrefix) }
}

/// The protocol's own message types.
enum EnvelopeType {
    static let reservedPrefix = "peerkit."
    static let hello = "peerkit.hello"
    static let ping = "peerkit.ping"
    static let pong = "peerkit.pong"
    static let bye = "peerkit.bye"
    static let error = "peerkit.error"
    static let rename = "peerkit.rename"
    /// The prefix of the resource feature's control frames (`peerkit.resource.offer`, ...).
    static let resourcePrefix = "peerkit.resource."
}
