import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Runs the handlers of one transceiver, one at a time, in the order messages arrived.
///
/// Connections hand it messages on their event loops (``enqueue(_:from:on:)`` never blocks);
/// replies to this transceiver's own requests are resolved at once, everything else is queued
/// for ``run()``, which decodes payloads and calls handlers off the event loops. The queue is
/// drained in batches: one wake-up of the handler task takes every message queued meanwhile.
final class MessageDispatcher: Sendable {
    private struct Inbound: Sendable {
        var envelope: Envelope
        var sender: Peer
        var connection: PeerConnection
    }

    private struct Queue {
        var messages: [Inbound] = []
        var waiting: CheckedContinuation<[Inbound], Never>?
        var finished = false
    }

    private let registry: MessageRegistry
    private let pending: PendingRequests
    private let logger: Logger
    private let reportError: @Sendable (PeerKitError) -> Void
    private let queue = NIOLockedValueBox(Queue())

    init(registry: MessageRegistry, pending: PendingRequests, logger: Logger, reportError: @escaping @Sendable (PeerKitError) -> Void) {
        self.registry = registry
        self.pending = pending
        self.logger = logger
        self.reportError = reportError
    }

    /// Accepts a message from a connection.
    func enqueue(_ envelope: Envelope, from sender: Peer, on connection: PeerConnection) {
        if envelope.replyTo != nil {
            if !pending.resolve(envelope, from: sender.id) {
                logger.debug("Dropped a \(envelope.type) reply from \(sender) that no request is waiting for.")
            }
            return
        }
        let message = Inbound(envelope: envelope, sender: sender, connection: connection)
        let wake = queue.withLockedValue { queue -> (CheckedContinuation<[Inbound], Never>, [Inbound])? in
            guard !queue.finished else { return nil }
            guard let waiting = queue.waiting else {
                queue.messages.append(message)
                return nil
            }
            queue.waiting = nil
            return (waiting, [message])
        }
        if let (waiting, batch) = wake { waiting.resume(returning: batch) }
    }

    /// Ends ``run()`` once the queued messages are handled.
    func finish() {
        let waiting = queue.withLockedValue { queue -> CheckedContinuation<[Inbound], Never>? in
            queue.finished = true
            defer { queue.waiting = nil }
            return queue.waiting
        }
        waiting?.resume(returning: [])
    }

    /// Handles queued messages until ``finish()``.
    func run() async {
        while true {
            let batch = await nextBatch()
            if batch.isEmpty { return }
            for message in batch {
                await handle(message)
            }
        }
    }

    /// Every message queued so far, waiting for one when there is none; empty once finished.
    private func nextBatch() async -> [Inbound] {
        let ready = queue.withLockedValue { queue -> [Inbound]? in
            guard queue.messages.isEmpty else {
                defer { queue.messages.removeAll(keepingCapacity: true) }
                return queue.messages
            }
            return queue.finished ? [] : nil
        }
        if let ready { return ready }
        return await withCheckedContinuation { continuation in
            let ready = queue.withLockedValue { queue -> [Inbound]? in
                if !queue.messages.isEmpty {
                    defer { queue.messages.removeAll(keepingCapacity: true) }
                    return queue.messages
                }
                if queue.finished { return [] }
                queue.waiting = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
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
