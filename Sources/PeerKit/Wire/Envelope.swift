import NIOCore
internal import PeerKitJSON

/// One decoded frame: the envelope around a message.
///
/// `payload` holds the raw JSON bytes of the `"payload"` value, a slice of the frame (no copy);
/// it is decoded into a Swift type only by the code that wants it, through ``decodePayload(_:)``:
/// application messages and the protocol's own control frames alike go through PeerKit's JSON
/// codec (``PayloadDecoder``), so there is one decoder and one place where it is called.
struct Envelope: Sendable, Equatable {
    /// The wire key (`"type"`).
    let type: String
    /// Whether the type is reserved for the protocol itself (`peerkit.…`). Worked out once, when
    /// the envelope is made: every frame received is asked three or four times on its way in,
    /// and each `hasPrefix` compares as `String`s do (canonical equivalence, not bytes).
    let isControl: Bool
    /// Set when the sender expects a reply.
    var id: String?
    /// The `id` this message answers.
    var replyTo: String?
    /// The group the message was sent to (feature `groups`); nil for a message sent to peers.
    var group: String?
    /// The JSON text of the payload value.
    var payload: ByteBuffer
    /// Where the payload's long strings end, as ``EnvelopeParser`` found them while checking the
    /// frame (offsets into `payload`'s readable bytes), so decoding them does not scan them again.
    var payloadStringEnds: [Int: Int]

    init(type: String, id: String? = nil, replyTo: String? = nil, group: String? = nil, payload: ByteBuffer, payloadStringEnds: [Int: Int] = [Int: Int]()) {
        self.type = type
        self.isControl = EnvelopeType.isReserved(type)
        self.id = id
        self.replyTo = replyTo
        self.group = group
        self.payload = payload
        self.payloadStringEnds = payloadStringEnds
    }

    /// Decodes the payload as a `T` with PeerKit's JSON codec. The payload's syntax is checked
    /// again unless `syntaxChecked` (true for envelopes out of ``EnvelopeParser``, which checks
    /// every payload).
    func decodePayload<T: Decodable>(_ type: T.Type, syntaxChecked: Bool = true) throws -> T {
        try PayloadDecoder.decode(T.self, from: payload, syntaxChecked: syntaxChecked, longStringEnds: payloadStringEnds)
    }
}

/// The protocol's own message types.
enum EnvelopeType {
    static let reservedPrefix = "peerkit."

    /// Whether `type` is reserved for the protocol: its UTF-8 bytes start with `peerkit.`, as
    /// `Documentation/Protocol.md` says. Compared byte by byte, as any implementation compares
    /// it: `String.hasPrefix` compares characters, a check for grapheme boundaries per message.
    static func isReserved(_ type: String) -> Bool {
        type.utf8.starts(with: reservedPrefix.utf8)
    }
    static let hello = "peerkit.hello"
    static let ping = "peerkit.ping"
    static let pong = "peerkit.pong"
    static let bye = "peerkit.bye"
    static let error = "peerkit.error"
    static let rename = "peerkit.rename"
    /// Feature `groups`: the sender's group membership (see `Documentation/Protocol.md`).
    static let groups = "peerkit.groups"

    /// Control types the connection layer does not handle itself but passes up, in order with
    /// the connection's other events, to the layer that owns the feature.
    /// Feature `resume`'s frames go up too (``SessionFrame``): to the connection manager.
    static let passedUp: Set<String> = [groups, "peerkit.resume", "peerkit.resend", "peerkit.ack"]

    /// Feature `resources`: the prefix of its control frames (`peerkit.resource.offer`, ...),
    /// which go to the resource transfers, not through the event queue.
    static let resourcePrefix = "peerkit.resource."
}
