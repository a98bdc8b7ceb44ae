import NIOConcurrencyHelpers
import NIOCore

/// The handlers of one transceiver, keyed by wire key. Registering a key again replaces its handler.
final class MessageRegistry: Sendable {
    /// A type-erased handler: decodes the payload, runs the user's closure, and returns the
    /// reply to send when the closure produces one.
    ///
    /// It runs on its caller's executor (`nonisolated(nonsending)`, SE-0461): the dispatcher
    /// calls it once per message, and a plain `async` closure would switch executors on each
    /// call, to the one it already runs on.
    struct Handler: Sendable {
        let handle: nonisolated(nonsending) @Sendable (_ envelope: Envelope, _ sender: Peer) async throws -> EncodedMessage?
    }

    /// What handles a wire key that has no handler of its own: the key, the payload, the sender.
    typealias Fallback = @Sendable (_ type: String, _ payload: ByteBuffer, _ sender: Peer) async -> Void

    private let handlers = NIOLockedValueBox<[String: Handler]>([:])
    private let fallback = NIOLockedValueBox<Fallback?>(nil)

    /// Registers `handler` for `type`, replacing any earlier one.
    func register(_ type: String, _ handler: Handler) {
        handlers.withLockedValue { $0[type] = handler }
    }

    /// Removes the handler for `type`.
    func remove(_ type: String) {
        handlers.withLockedValue { $0[type] = nil }
    }

    /// Sets (or, with nil, removes) the handler of wire keys that have none of their own.
    func setFallback(_ fallback: Fallback?) {
        self.fallback.withLockedValue { $0 = fallback }
    }

    /// The handler for `type`: its own, else the fallback, else nil.
    func handler(for type: String) -> Handler? {
        if let handler = handlers.withLockedValue({ $0[type] }) { return handler }
        guard let fallback = fallback.withLockedValue({ $0 }) else { return nil }
        return Handler { envelope, sender in
            await fallback(type, envelope.payload, sender)
            return nil
        }
    }
}
