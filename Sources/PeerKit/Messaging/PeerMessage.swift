import NIOConcurrencyHelpers
import Synchronization

/// A type that names its own wire key.
///
/// By default a message's wire key is its type name (`String(describing: T.self)`), as in
/// MultipeerKit. Conform to `PeerMessage` when two modules have types of the same name, or when a
/// program in another language expects a particular key:
///
/// ```swift
/// struct AddItemCommand: Codable, PeerMessage {
///     static var messageType: String { "com.example.listr.AddItemCommand" }
///     let title: String
/// }
/// ```
public protocol PeerMessage {
    /// The value of the envelope's `type` key for this type. Must not start with `peerkit.`.
    static var messageType: String { get }
}

/// The wire key of a type: ``PeerMessage/messageType`` when it conforms, else its type name.
///
/// Worked out once per type and remembered: `String(describing:)` and the conformance check cost
/// more than encoding a small message.
public func peerMessageType<T>(of type: T.Type) -> String {
    wireKey(of: type).name
}

/// What is remembered of a type that is sent or received: its wire key (``peerMessageType(of:)``).
func wireKey<T>(of type: T.Type) -> WireKey {
    let id = ObjectIdentifier(type)
    if let known = WireKeyCache.keys.withLockedValue({ $0[id] }) {
        return known
    }
    let key = WireKey(name: (type as? any PeerMessage.Type)?.messageType ?? String(describing: type))
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

    /// The wire key.
    let name: String
    private let lastFrameBytes = Atomic<Int>(0)

    init(name: String) {
        self.name = name
    }

    /// The capacity to start this type's next frame with: the last one's size and an eighth
    /// more, for a payload that grew a little (a longer number, a longer name). A frame that
    /// needs more grows as any buffer does; the slack an outbox holds per frame is that eighth.
    var frameCapacity: Int {
        let last = lastFrameBytes.load(ordering: .relaxed)
        return max(Self.minimumFrameCapacity, last + last / 8)
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
