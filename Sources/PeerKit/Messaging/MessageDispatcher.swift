import Logging
import NIOCore

/// Runs the handlers of one transceiver, one at a time, in the order messages arrived.
///
/// Connections hand it messages on their event loops (``enqueue(_:from:on:)`` never blocks);
/// replies to this transceiver's own requests are resolved at once, everything else is queued
/// for ``run()``, which decodes payloads and calls handlers off the event loops.
final class MessageDispatcher: Sendable {
    private struct Inbound: Sendable {
        var envelope: Envelope
        var sender: Peer
        var connection: PeerConnection
    }

    private let registry: MessageRegistry
    private let pending: PendingRequests
    private let logger: Logger
    private let reportError: @Sendable (PeerKitError) -> Void
    private let inbox: AsyncStream<Inbound>
    private let continuation: AsyncStream<Inbound>.Continuation

    init(registry: MessageRegistry, pending: PendingRequests, logger: Logger, reportError: @escaping @Sendable (PeerKitError) -> Void) {
        self.registry = registry
        self.pending = pending
        self.logger = logger
        self.reportError = reportError
        (inbox, continuation) = AsyncStream.makeStream(of: Inbound.self)
    }

    /// Accepts a message from a connection.
    func enqueue(_ envelope: Envelope, from sender: Peer, on connection: PeerConnection) {
        if envelope.replyTo != nil {
            if !pending.resolve(envelope, from: sender.id) {
                logger.debug("Dropped a \(envelope.type) reply from \(sender) that no request is waiting for.")
            }
            return
        }
        continuation.yield(Inbound(envelope: envelope, sender: sender, connection: connection))
    }

    /// Ends ``run()`` once the queued messages are handled.
    func finish() {
        continuation.finish()
    }

    /// Handles queued messages until ``finish()``.
    func run() async {
        for await message in inbox {
            await handle(message)
        }
    }

    private func handle(_ message: Inbound) async {
        let envelope = message.envelope
        guard let handler = registry.handler(for: envelope.type) else {
            let error = PeerKitError.noHandler(type: envelope.type)
            if let id = envelope.id {
                replyWithError(error.description, to: id, on: message.connection)
            } else {
                logger.warning("Dropped a message from \(message.sender): \(error)")
            }
            return
        }
        do {
            let reply = try await handler.handle(envelope.payload, message.sender)
            if let reply, let id = envelope.id {
                message.connection.send(reply.frame(replyTo: id))
            }
        } catch let error as PeerKitError {
            if let id = envelope.id {
                replyWithError(error.description, to: id, on: message.connection)
            } else {
                logger.warning("A message from \(message.sender) was not handled: \(error)")
                reportError(error)
            }
        } catch {
            // The handler itself threw: tell the requester why.
            if let id = envelope.id {
                replyWithError("\(error)", to: id, on: message.connection)
            } else {
                logger.warning("The \(envelope.type) handler failed: \(error)")
            }
        }
    }

    private func replyWithError(_ reason: String, to id: String, on connection: PeerConnection) {
        connection.send(ConnectionStateMachine.ControlFrame.error(reason: reason, replyTo: id).encode())
    }
}
