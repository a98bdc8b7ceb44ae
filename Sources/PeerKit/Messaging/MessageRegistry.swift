import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// The handlers of one transceiver, keyed by wire key. Registering a key again replaces its handler.
final class MessageRegistry: Sendable {
    /// A type-erased handler: decodes the payload, runs the user's closure, and returns the
    /// reply to send when the closure produces one.
    ///
    /// It runs on its caller's executor (`nonisolated(nonsending)`, SE-0461): the dispatcher
    /// calls it once per message, and a plain `async` closure would switch executors on each
    /// call, to the one it already runs on.
    struct Handler: Sendable {
        typealias Handle = nonisolated(nonsending) @Sendable (_ envelope: Envelope, _ sender: Peer) async throws -> EncodedMessage?

        let handle: Handle
        /// The same work without suspending, for a responder registered with
        /// ``PeerTransceiver/respondImmediately(to:using:)``: the dispatcher may call it on the
        /// connection's event loop as the request is read (``MessageDispatcher``). Nil for the rest.
        let handleImmediately: (@Sendable (_ envelope: Envelope, _ sender: Peer) throws -> EncodedMessage?)?

        /// A handler that may suspend: run by the dispatcher's task.
        init(handle: @escaping Handle) {
            self.handle = handle
            self.handleImmediately = nil
        }

        /// A handler that never suspends: run where the request is read when nothing is ahead of
        /// it, else by the dispatcher's task in turn.
        init(immediately handle: @escaping @Sendable (_ envelope: Envelope, _ sender: Peer) throws -> EncodedMessage?) {
            self.handle = { envelope, sender in try handle(envelope, sender) }
            self.handleImmediately = handle
        }
    }

    /// What handles a wire key that has no handler of its own: the key, the payload, the sender.
    typealias Fallback = @Sendable (_ type: String, _ payload: ByteBuffer, _ sender: Peer) async -> Void

    /// A handler that ``handler(for:reusing:)`` found, kept by its caller for the next message:
    /// it serves every message of its wire key until a handler is registered or removed.
    struct Found: Sendable {
        fileprivate let type: String
        fileprivate let generation: Int
        fileprivate let handler: Handler
    }

    private let handlers = NIOLockedValueBox<[String: Handler]>([:])
    private let fallback = NIOLockedValueBox<Fallback?>(nil)
    /// Counts the changes to ``handlers``: a ``Found`` of an earlier count is looked up again.
    private let generation = Atomic<Int>(0)
    /// Whether a handler that runs immediately was ever registered: until one is, the dispatcher
    /// looks for none (a load instead of a lookup per message).
    private let someRunImmediately = Atomic<Bool>(false)

    /// Whether some wire key may have a handler that runs immediately (``Handler/handleImmediately``).
    var mayHaveImmediateHandlers: Bool { someRunImmediately.load(ordering: .relaxed) }

    /// Registers `handler` for `type`, replacing any earlier one.
    func register(_ type: String, _ handler: Handler) {
        if handler.handleImmediately != nil { someRunImmediately.store(true, ordering: .relaxed) }
        handlers.withLockedValue { $0[type] = handler }
        generation.add(1, ordering: .releasing)
    }

    /// Removes the handler for `type`.
    func remove(_ type: String) {
        handlers.withLockedValue { $0[type] = nil }
        generation.add(1, ordering: .releasing)
    }

    /// Sets (or, with nil, removes) the handler of wire keys that have none of their own.
    func setFallback(_ fallback: Fallback?) {
        self.fallback.withLockedValue { $0 = fallback }
    }

    /// The handler for `type`, as ``handler(for:)``; `last`, the one found for the message
    /// before, serves again when it is `type`'s and no handler changed since, without the lock
    /// and the lookup (the dispatcher asks for every message, most often of one type after
    /// another). Otherwise `last` becomes the handler found; the fallback is never kept.
    func handler(for type: String, reusing last: inout Found?) -> Handler? {
        // Read before the lookup: a change meanwhile makes the next call look again.
        let now = generation.load(ordering: .acquiring)
        if let last, last.generation == now, last.type == type { return last.handler }
        guard let handler = handlers.withLockedValue({ $0[type] }) else {
            last = nil
            return fallbackHandler(for: type)
        }
        last = Found(type: type, generation: now, handler: handler)
        return handler
    }

    /// The handler for `type`: its own, else the fallback, else nil.
    func handler(for type: String) -> Handler? {
        if let handler = handlers.withLockedValue({ $0[type] }) { return handler }
        return fallbackHandler(for: type)
    }

    /// The fallback, as the handler of `type`; nil when there is none.
    private func fallbackHandler(for type: String) -> Handler? {
        guard let fallback = fallback.withLockedValue({ $0 }) else { return nil }
        return Handler { envelope, sender in
            await fallback(type, envelope.payload, sender)
            return nil
        }
    }
}
