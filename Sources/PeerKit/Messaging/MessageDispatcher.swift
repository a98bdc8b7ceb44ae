import Synchronization
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Runs the handlers of one transceiver, one at a time, fairly across peers.
///
/// Connections hand it messages on their event loops (``enqueue(_:from:on:)`` never blocks);
/// replies to this transceiver's own requests are resolved at once, everything else is queued
/// for ``run()``, which decodes payloads and calls handlers off the event loops.
///
/// Each connection has its own queue, and ``run()`` takes one message from each connection with
/// messages in turn (round robin): a peer that floods us delays another peer's request by at most
/// one of its own messages per turn, however many it has queued. Messages of one connection keep
/// their order. Each message handled is credited back to its connection
/// (``PeerConnection/inboundHandled(_:)``), which resumes reading from a connection that was
/// paused for being too far ahead.
final class MessageDispatcher: InboundMessageSink {
    private struct Inbound: Sendable {
        var envelope: Envelope
        var sender: Peer
        var connection: PeerConnection
    }

    private struct Queue {
        /// Each connection's messages, in arrival order.
        var perConnection: [ObjectIdentifier: CircularBuffer<Inbound>] = [:]
        /// Connections with queued messages, in the order they get their next turn.
        var turns = CircularBuffer<ObjectIdentifier>()
        var waiting: CheckedContinuation<[Inbound], Never>?
        var finished = false

        var isEmpty: Bool { turns.isEmpty }

        mutating func append(_ message: Inbound) {
            let id = ObjectIdentifier(message.connection)
            if perConnection[id, default: []].isEmpty { turns.append(id) }
            perConnection[id, default: []].append(message)
        }

        /// One round: the oldest message of each connection that has any.
        mutating func takeRound() -> [Inbound] {
            var round: [Inbound] = []
            round.reserveCapacity(turns.count)
            for _ in 0..<turns.count {
                // In place: taking the buffer out of the dictionary first (`var messages =
                // perConnection[id]`) would copy all of it for every message (copy on write), and
                // a queue of n messages would cost n² copies.
                guard let id = turns.popFirst(), let message = perConnection[id]?.popFirst() else { continue }
                round.append(message)
                if perConnection[id]?.isEmpty ?? true {
                    perConnection[id] = nil
                } else {
                    turns.append(id)
                }
            }
            return round
        }
    }

    private let registry: MessageRegistry
    private let pending: PendingRequests
    private let groups: GroupDirectory
    private let metrics: PeerMetrics
    private let logger: Logger
    private let reportError: @Sendable (PeerKitError) -> Void
    private let queue = NIOLockedValueBox(Queue())
    /// Messages accepted whose handler has not finished yet (a test network's `settle()` waits for none).
    private let unfinished = Atomic<Int>(0)

    /// How many accepted messages still wait for their handler, or are in it.
    var unfinishedCount: Int { unfinished.load(ordering: .acquiring) }

    init(registry: MessageRegistry, pending: PendingRequests, groups: GroupDirectory, metrics: PeerMetrics = .disabled, logger: Logger, reportError: @escaping @Sendable (PeerKitError) -> Void) {
        self.registry = registry
        self.pending = pending
        self.groups = groups
        self.metrics = metrics
        self.logger = logger
        self.reportError = reportError
    }

    /// Accepts a message from a connection.
    func enqueue(_ envelope: Envelope, from sender: Peer, on connection: PeerConnection) {
        metrics.receivedType(envelope.type).received(payloadBytes: envelope.payload.readableBytes)
        if envelope.replyTo != nil {
            if !pending.resolve(envelope, from: sender.id) {
                logger.debug("Dropped a \(LogSafe.text(envelope.type, maximumBytes: 80)) reply from \(sender) that no request is waiting for.")
            }
            return
        }
        let message = Inbound(envelope: envelope, sender: sender, connection: connection)
        let (queued, wake) = queue.withLockedValue { queue -> (Bool, (CheckedContinuation<[Inbound], Never>, [Inbound])?) in
            guard !queue.finished else { return (false, nil) }
            queue.append(message)
            unfinished.add(1, ordering: .releasing)
            guard let waiting = queue.waiting else { return (true, nil) }
            queue.waiting = nil
            return (true, (waiting, queue.takeRound()))
        }
        if queued { metrics.receiveQueueBytes.increment(by: Double(PeerConnectionHandler.cost(of: envelope))) }
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
            let batch = await nextRound()
            if batch.isEmpty { return }
            for message in batch {
                await handle(message)
                let cost = PeerConnectionHandler.cost(of: message.envelope)
                metrics.receiveQueueBytes.decrement(by: Double(cost))
                message.connection.inboundHandled(cost)
                unfinished.subtract(1, ordering: .releasing)
            }
        }
    }

    /// The next round of queued messages, waiting for one when there is none; empty once finished.
    private func nextRound() async -> [Inbound] {
        let ready = queue.withLockedValue { queue -> [Inbound]? in
            guard queue.isEmpty else { return queue.takeRound() }
            return queue.finished ? [] : nil
        }
        if let ready { return ready }
        return await withCheckedContinuation { continuation in
            let ready = queue.withLockedValue { queue -> [Inbound]? in
                if !queue.isEmpty { return queue.takeRound() }
                if queue.finished { return [] }
                queue.waiting = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func handle(_ message: Inbound) async {
        let envelope = message.envelope
        if let group = envelope.group, !groups.isMember(group) {
            // Sent to a group this side has left (the sender had not heard yet): not delivered.
            logger.debug("Dropped a \(LogSafe.text(envelope.type, maximumBytes: 80)) message from \(message.sender) to group \"\(LogSafe.text(group, maximumBytes: 80))\", which this transceiver is not in.")
            if let id = envelope.id {
                replyWithError("This peer is not in group \"\(LogSafe.text(group, maximumBytes: 80))\".", to: id, on: message.connection)
            }
            return
        }
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
            let reply = try await handler.handle(envelope, message.sender)
            if let reply, let id = envelope.id {
                metrics.usedType(reply.type).sent(payloadBytes: reply.payload.readableBytes)
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
                logger.warning("The \(LogSafe.text(envelope.type, maximumBytes: 80)) handler failed: \(error)")
            }
        }
    }

    private func replyWithError(_ reason: String, to id: String, on connection: PeerConnection) {
        connection.send(ConnectionStateMachine.ControlFrame.error(reason: reason, replyTo: id).encode())
    }
}
