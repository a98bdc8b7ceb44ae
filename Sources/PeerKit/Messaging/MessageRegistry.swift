import NIOConcurrencyHelpers
import NIOCore

/// The handlers of one transceiver, keyed by wire key. Registering a key again replaces its handler.
final class MessageRegistry: Sendable {
    /// A type-erased handler: decodes the payload, runs the user's closure, and returns the
    /// reply to send when the closure produces one.
    struct Handler: Sendable {
        let handle: @Sendable (_ payload: ByteBuffer, _ sender: Peer) async throws -> EncodedMessage?
    }

    private let handlers = NIOLockedValueBox<[String: Handler]>([:])

    /// Registers `handler` for `type`, replacing any earlier one.
    func register(_ type: String, _ handler: Handler) {
        handlers.withLockedValue { $0[type] = handler }
    }

    /// Removes the handler for `type`.
    func remove(_ type: String) {
        handlers.withLockedValue { $0[type] = nil }
    }

    /// The handler for `type`.
    func handler(for type: String) -> Handler? {
        handlers.withLockedValue { $0[type] }
    }
}
