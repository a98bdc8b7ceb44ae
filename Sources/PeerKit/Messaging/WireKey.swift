import NIOConcurrencyHelpers
import Synchronization

/// What is remembered of a type that is sent or received: its wire key (``peerMessageType(of:)``).
func wireKey<T>(of type: T.Type) -> WireKey {
    let id = ObjectIdentifier(type)
    if let known = WireKeyCache.keys.withLockedValue({ $0[id] }) {
        return known
    }
    let key = WireKey(name: (type as? any PeerMessage.Type)?.messageType ?? String(describing: type), writesOwnPayload: type is any PeerPayloadEncodable.Type)
    return WireKeyCache.keys.withLockedValue { keys in
        // Another thread may have made it meanwhile: every caller gets the same one.
        if let known = keys[id] { return known }
        keys[id] = key
        return key
    }
}

/// A type's wire key, and the size of the last frame made for one of its values, so that the
/// next frame's buffer is allocated at about its size at once, not grown (a copy) while the
/// payload is written into it.
final class WireKey: Sendable {
    /// The smallest buffer a frame is started in.
    static let minimumFrameCapacity = 128
    /// The largest buffer a frame is started in; a larger frame grows as any buffer does.
    static let maximumFrameCapacity = 64 * 1024

    /// The wire key.
    let name: String
    /// Whether the key starts with `peerkit.`, which only the protocol's own frames may.
    let isReserved: Bool
    /// Whether the type is ``PeerPayloadEncodable``: its values are cast to that and write their
    /// own payloads, and values of other types pay no cast.
    let writesOwnPayload: Bool
    private let lastFrameBytes = Atomic<Int>(0)

    init(name: String, writesOwnPayload: Bool = false) {
        self.name = name
        self.isReserved = EnvelopeType.isReserved(name)
        self.writesOwnPayload = writesOwnPayload
    }

    /// The capacity to start this type's next frame with: the last one's size and an eighth
    /// more, for a payload that grew a little (a longer number, a longer name), within
    /// ``minimumFrameCapacity`` and ``maximumFrameCapacity``. A frame much smaller than its
    /// buffer is copied into one of its size (``EncodedMessage``): an outbox counts its frames'
    /// bytes, so what a frame holds must stay near them.
    var frameCapacity: Int {
        let last = lastFrameBytes.load(ordering: .relaxed)
        return min(Self.maximumFrameCapacity, max(Self.minimumFrameCapacity, last + last / 8))
    }

    /// Remembers the size of a frame just made for this type.
    func noteFrame(bytes: Int) {
        // Most frames of a type have the same size: no write to a shared cache line for those.
        if lastFrameBytes.load(ordering: .relaxed) != bytes {
            lastFrameBytes.store(bytes, ordering: .relaxed)
        }
    }
}

/// The wire keys worked out so far, by type.
private enum WireKeyCache {
    static let keys = NIOLockedValueBox<[ObjectIdentifier: WireKey]>([:])
}
