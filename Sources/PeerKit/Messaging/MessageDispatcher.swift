import DequeModule
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
/// Each peer has its own queue, and ``run()`` takes one message from each peer with messages in
/// turn (round robin): a peer that floods us delays another peer's request by at most one of its
/// own messages per turn, however many it has queued. While one peer alone has messages, a turn
/// takes up to ``maximumBatch`` of them at once (one lock for all, not one each); when another
/// peer's message arrives meanwhile, what is left of the batch goes back to the head of its
/// queue before the next message is handled, so the bound above still holds. Messages of one
/// peer keep their order, whichever of its connections they came on. Each message handled is
/// credited back to its connection (``PeerConnection/inboundHandled(_:)``), which resumes
/// reading from a connection that was paused for being too far ahead.
///
/// **Outbound backpressure.** A peer's handlers run only while its outbox has room
/// (``PeerOutbound/outboxState(of:)``): a peer that does not read its replies gets no more of
/// them made; its queue waits (so its connection soon stops being read) until its outbox drains
/// (``outboxHasRoom()``). Replies go to the requesting peer on whichever connection is its own
/// now, not necessarily the one the request came on.
///
/// **Disconnected peers.** Requests of a peer that disconnected are dropped unhandled: nobody is
/// there to receive their replies. Its one-way messages already accepted are still handled.
///
/// **Immediate responders.** A request whose handler never suspends
/// (``MessageRegistry/Handler/handleImmediately``, ``PeerTransceiver/respondImmediately(to:using:)``)
/// is answered inside ``enqueue(_:from:on:)``, on the connection's event loop, when ``run()`` is
/// waiting for work (no handler runs) and its peer has nothing queued; while it is answered,
/// ``run()`` is not woken (``Queue/answeringImmediately``). So handlers still run one at a time
/// and a peer's messages in order; a request that finds a handler running or its peer's messages
/// queued is queued like any message. A read's requests are answered so up to ``maximumBatch``,
/// and until another peer's message is queued, as ``run()``'s batches are.
final class MessageDispatcher: InboundMessageSink {
    private struct Inbound: Sendable {
        var envelope: Envelope
        var sender: Peer
        var connection: PeerConnection
    }

    private struct Queue {
        /// Each peer's messages, in arrival order.
        var perPeer: [String: Deque<Inbound>] = [:]
        /// Peers with queued messages, in the order they get their next turn.
        var turns = CircularBuffer<String>()
        /// Peers with queued messages whose outbox is full: no turn until it drains.
        var parked: Set<String> = []
        var waiting: CheckedContinuation<Round, Never>?
        var finished = false
        /// How many turns were given to peers that had none, ever (see ``Round/turnsGiven``).
        var turnsGiven = 0
        /// A request is being answered by its immediate handler, outside ``run()``: ``run()``,
        /// waiting for work, is not woken until it is done (handlers run one at a time).
        var answeringImmediately = false
        /// The wire keys whose immediate handler was named in a warning for running long.
        var warnedSlow: Set<String> = []

        var isEmpty: Bool { turns.isEmpty }

        /// Queues the messages among `envelopes` (those that are not replies) of `sender`, in
        /// order; returns how many, and whether the peer got a turn it did not have.
        mutating func append(_ envelopes: ArraySlice<Envelope>, from sender: Peer, on connection: PeerConnection) -> (count: Int, newTurn: Bool) {
            // One lookup of the peer's queue, in place.
            let (count, wasEmpty) = Self.append(envelopes, from: sender, on: connection, to: &perPeer[sender.id, default: []])
            guard count > 0, wasEmpty, !parked.contains(sender.id) else { return (count, false) }
            turns.append(sender.id)
            turnsGiven &+= 1
            return (count, true)
        }

        /// Appends the messages among `envelopes` to `messages`; returns how many, and whether
        /// `messages` were empty.
        private static func append(_ envelopes: ArraySlice<Envelope>, from sender: Peer, on connection: PeerConnection,
                                   to messages: inout Deque<Inbound>) -> (count: Int, wasEmpty: Bool) {
            let wasEmpty = messages.isEmpty
            let before = messages.count
            // One copy of each envelope, into its message: a lazy filter and map would make two.
            for index in envelopes.indices where envelopes[index].replyTo == nil {
                messages.append(Inbound(envelope: envelopes[index], sender: sender, connection: connection))
            }
            return (messages.count - before, wasEmpty)
        }

        /// One round: the oldest message of each peer that has any and is not parked; while one
        /// peer alone has a turn, up to ``MessageDispatcher/maximumBatch`` of its messages.
        mutating func takeRound() -> Round {
            if turns.count == 1, let id = turns.first {
                return Round(messages: takeBatch(of: id), onePeer: true, turnsGiven: turnsGiven)
            }
            return Round(messages: takeOneEach(), onePeer: false, turnsGiven: turnsGiven)
        }

        /// Up to ``MessageDispatcher/maximumBatch`` messages of `id`, the one peer with a turn.
        private mutating func takeBatch(of id: String) -> Deque<Inbound> {
            guard let count = perPeer[id]?.count, count > MessageDispatcher.maximumBatch else {
                // All of them: the peer's queue itself, without moving a message.
                turns.removeAll()
                return perPeer.removeValue(forKey: id) ?? []
            }
            // One lookup of the peer's queue, in place, for the whole batch: its hash is worked
            // out once, not once per message.
            return Self.takeFirst(MessageDispatcher.maximumBatch, of: &perPeer[id, default: []])
        }

        /// Moves the first `count` messages of `messages` out, in order (a Deque moves each
        /// message out, no copy).
        private static func takeFirst(_ count: Int, of messages: inout Deque<Inbound>) -> Deque<Inbound> {
            var batch = Deque<Inbound>(minimumCapacity: count)
            for _ in 0..<count {
                guard let message = messages.popFirst() else { break }
                batch.append(message)
            }
            return batch
        }

        /// The oldest message of each peer with a turn; each goes to the back of the turns.
        private mutating func takeOneEach() -> Deque<Inbound> {
            var round = Deque<Inbound>(minimumCapacity: turns.count)
            for _ in 0..<turns.count {
                // In place: taking the queue out of the dictionary first (`var messages =
                // perPeer[id]`) would copy all of it for every message (copy on write), and
                // a queue of n messages would cost n² copies.
                guard let id = turns.popFirst(), let message = perPeer[id]?.popFirst() else { continue }
                round.append(message)
                if perPeer[id]?.isEmpty ?? true {
                    perPeer[id] = nil
                } else {
                    turns.append(id)
                }
            }
            return round
        }

        /// Puts `messages` (of one peer, in order) back at the head of their peer's queue and
        /// parks the peer.
        mutating func park(_ messages: Deque<Inbound>) {
            guard let id = messages.first?.sender.id else { return }
            if let index = turns.firstIndex(of: id) { turns.remove(at: index) }
            perPeer[id, default: []].prepend(contentsOf: messages)
            parked.insert(id)
        }

        /// Puts what is left of a one-peer batch back at the head of its peer's queue, in order,
        /// when another peer has a turn now; returns whether it did.
        mutating func putBackIfOthersWait(_ messages: Deque<Inbound>) -> Bool {
            guard let id = messages.first?.sender.id, turns.contains(where: { $0 != id }) else { return false }
            perPeer[id, default: []].prepend(contentsOf: messages)
            if !parked.contains(id), !turns.contains(id) { turns.append(id) }
            return true
        }

        /// Gives every parked peer a turn again (their outbox is checked once more).
        mutating func unparkAll() {
            for id in parked where perPeer[id] != nil { turns.append(id) }
            parked = []
        }

        /// Takes out the requests of `peerID` that did not come on `current`, its connection now
        /// (nil: it has none); its one-way messages stay.
        mutating func removeRequests(of peerID: String, notOn current: PeerConnection?) -> [Inbound] {
            guard let messages = perPeer[peerID] else { return [] }
            var kept = Deque<Inbound>()
            var removed: [Inbound] = []
            for message in messages {
                if message.envelope.id != nil, message.connection !== current {
                    removed.append(message)
                } else {
                    kept.append(message)
                }
            }
            if kept.isEmpty {
                perPeer[peerID] = nil
                parked.remove(peerID)
                if let index = turns.firstIndex(of: peerID) { turns.remove(at: index) }
            } else {
                perPeer[peerID] = kept
            }
            return removed
        }
    }

    /// The messages one turn of ``run()`` takes; with ``onePeer``, all of one peer.
    private struct Round {
        /// In order; ``run()`` moves each out as it handles it.
        var messages: Deque<Inbound>
        var onePeer: Bool
        /// ``Queue/turnsGiven`` when the round was taken: while it is unchanged, no other peer
        /// got a turn since, and a one-peer batch goes on.
        var turnsGiven: Int
        /// Set only on ``finished``: the dispatcher ends. An empty round is not the end.
        var isFinished = false

        static let finished = Round(messages: [], onePeer: false, turnsGiven: 0, isFinished: true)
    }

    /// The most messages one turn takes from a peer while it alone has messages: a round costs
    /// one lock for up to this many messages instead of one each.
    static let maximumBatch = 64

    private let registry: MessageRegistry
    private let pending: PendingRequests
    private let groups: GroupDirectory
    private let metrics: PeerMetrics
    private let logger: Logger
    private let reportError: @Sendable (PeerKitError) -> Void
    private let queue = NIOLockedValueBox(Queue())
    private let running = Atomic<Bool>(false)
    /// ``Queue/turnsGiven``, readable without the lock: ``run()`` checks it between the messages
    /// of a one-peer batch.
    private let turnsGiven = Atomic<Int>(0)
    /// Where replies go and whose outbox has room; nil in tests without connections (replies
    /// then go to the connection the request came on).
    private let outboundBox = NIOLockedValueBox<(any PeerOutbound)?>(nil)
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

    /// Where replies go; set before messages arrive.
    func setOutbound(_ outbound: (any PeerOutbound)?) {
        outboundBox.withLockedValue { $0 = outbound }
    }

    /// Accepts messages from a connection, in order: replies are resolved at once, the rest
    /// queued with one lock for all.
    func enqueue(_ envelopes: ArraySlice<Envelope>, from sender: Peer, on connection: PeerConnection) {
        var envelopes = envelopes
        var cost = 0
        // By index, in place: `for envelope in envelopes` would copy each envelope (a retain and
        // a release of each of its strings and its payload), and this runs for every message.
        for index in envelopes.indices {
            metrics.receivedType(envelopes[index].type).received(payloadBytes: envelopes[index].payload.readableBytes)
            if envelopes[index].replyTo != nil {
                if !pending.resolve(envelopes[index], from: sender.id) {
                    logger.debug("Dropped a \(LogSafe.text(envelopes[index].type, maximumBytes: 80)) reply from \(sender) that no request is waiting for.")
                }
            } else {
                cost += PeerConnectionHandler.cost(of: envelopes[index])
            }
        }
        guard cost > 0 else { return }
        if registry.mayHaveImmediateHandlers {
            let answered = answerImmediately(envelopes, from: sender, on: connection)
            guard answered.cost < cost else { return }
            cost -= answered.cost
            envelopes = envelopes[answered.end...]
        }
        let (queued, wake) = queue.withLockedValue { queue -> (Bool, (CheckedContinuation<Round, Never>, Round)?) in
            guard !queue.finished else { return (false, nil) }
            let (count, newTurn) = queue.append(envelopes, from: sender, on: connection)
            if newTurn { turnsGiven.store(queue.turnsGiven, ordering: .releasing) }
            unfinished.add(count, ordering: .releasing)
            // A parked peer's message gives it no turn: the dispatcher has nothing new to do.
            // While an immediate handler runs, the message waits for it (``endAnsweringImmediately``).
            guard let waiting = queue.waiting, !queue.isEmpty, !queue.answeringImmediately else { return (true, nil) }
            queue.waiting = nil
            return (true, (waiting, queue.takeRound()))
        }
        if queued {
            metrics.receiveQueueBytes.increment(by: Double(cost))
        } else {
            for envelope in envelopes where envelope.replyTo == nil { connection.inboundDropped(envelope) }
        }
        if let (waiting, batch) = wake { waiting.resume(returning: batch) }
    }

    /// The longest an immediate handler runs before it is named in a warning (once per wire key):
    /// while it runs, the connections of its event loop are neither read nor written.
    static let slowImmediateHandler = TimeAmount.milliseconds(50)

    /// Answers the requests at the head of `envelopes` (replies, resolved already, are passed
    /// over) whose handlers run immediately, while nothing is ahead of them (the type's
    /// documentation); returns where the rest begins and what the answered ones counted.
    ///
    /// Fair as ``run()``'s batches are: at most ``maximumBatch`` of a read's requests are answered
    /// here, and none more once another peer's message is queued; the rest wait their turn.
    private func answerImmediately(_ envelopes: ArraySlice<Envelope>, from sender: Peer, on connection: PeerConnection) -> (end: Int, cost: Int) {
        var index = envelopes.startIndex
        var cost = 0
        var answered = 0
        var turnsSeen: Int?
        defer { if turnsSeen != nil { endAnsweringImmediately() } }
        let outbound = outboundBox.withLockedValue { $0 }
        while index < envelopes.endIndex {
            if envelopes[index].replyTo != nil {
                index += 1
                continue
            }
            // Requests whose peer reads its replies, to no group or to one this side is in; the
            // rest go the usual way (a group this side left is answered there with the reason).
            guard let id = envelopes[index].id, envelopes[index].group.map(groups.isMember) ?? true,
                  let handler = registry.handler(for: envelopes[index].type), let handle = handler.handleImmediately,
                  (outbound?.outboxState(of: sender.id) ?? .room) == .room else { break }
            if let turnsSeen {
                guard answered < Self.maximumBatch, turnsGiven.load(ordering: .acquiring) == turnsSeen else { break }
            } else {
                guard let turns = beginAnsweringImmediately(for: sender.id) else { break }
                turnsSeen = turns
            }
            answered += 1
            let message = Inbound(envelope: envelopes[index], sender: sender, connection: connection)
            let started = NIODeadline.now()
            let result = Result { try handle(message.envelope, sender) }
            let took = NIODeadline.now() - started
            answer(id, with: result, of: message, outbound: outbound)
            if took > Self.slowImmediateHandler { warnSlow(message.envelope.type, took: took) }
            let messageCost = PeerConnectionHandler.cost(of: message.envelope)
            connection.inboundHandled(messageCost)
            cost += messageCost
            index += 1
        }
        return (index, cost)
    }

    /// Whether a request of `peerID` may be answered now, outside ``run()``: it is waiting for
    /// work and nothing of the peer is queued. If so, ``run()`` stays waiting until
    /// ``endAnsweringImmediately()``, and this returns ``Queue/turnsGiven`` (nil if not).
    private func beginAnsweringImmediately(for peerID: String) -> Int? {
        queue.withLockedValue { queue in
            guard queue.waiting != nil, !queue.finished, !queue.answeringImmediately, queue.perPeer[peerID] == nil else { return nil }
            queue.answeringImmediately = true
            return queue.turnsGiven
        }
    }

    /// The immediate answers are done: ``run()`` takes what arrived meanwhile.
    private func endAnsweringImmediately() {
        let wake = queue.withLockedValue { queue -> (CheckedContinuation<Round, Never>, Round)? in
            queue.answeringImmediately = false
            guard let waiting = queue.waiting, !queue.isEmpty else { return nil }
            queue.waiting = nil
            return (waiting, queue.takeRound())
        }
        if let (waiting, batch) = wake { waiting.resume(returning: batch) }
    }

    /// Names an immediate handler that ran long in the log, once per wire key.
    private func warnSlow(_ type: String, took: TimeAmount) {
        let first = queue.withLockedValue { $0.warnedSlow.insert(type).inserted }
        guard first else { return }
        let milliseconds = took.nanoseconds / 1_000_000
        logger.warning("The immediate handler of \(LogSafe.text(type, maximumBytes: 80)) requests ran for \(milliseconds) ms on an event loop, which read and wrote none of its connections meanwhile; register a handler that waits with respond(to:using:). This warning is not repeated for this type.")
    }

    /// Ends ``run()`` once the queued messages are handled.
    func finish() {
        let waiting = queue.withLockedValue { queue -> CheckedContinuation<Round, Never>? in
            queue.finished = true
            defer { queue.waiting = nil }
            return queue.waiting
        }
        waiting?.resume(returning: .finished)
    }

    /// Whether ``run()`` waits for a message to handle (a diagnostic for tests).
    var isWaitingForWork: Bool { queue.withLockedValue { $0.waiting != nil } }

    /// Whether ``run()`` has not returned (a diagnostic for tests).
    var isRunning: Bool { running.load(ordering: .acquiring) }

    /// Handles queued messages until ``finish()``.
    func run() async {
        running.store(true, ordering: .releasing)
        defer { running.store(false, ordering: .releasing) }
        // The last message's handler, for the next one of the same type (MessageRegistry.Found).
        var handlerFound: MessageRegistry.Found?
        while true {
            var round = await nextRound()
            if round.isFinished { return }
            let outbound = outboundBox.withLockedValue { $0 }
            var turnsSeen = round.turnsGiven
            var handledAny = false
            messages: while !round.messages.isEmpty {
                if round.onePeer, handledAny, turnsGiven.load(ordering: .acquiring) != turnsSeen {
                    // Another peer may have a turn now: it goes before the rest of this batch.
                    let rest = round.messages
                    let (putBack, given) = queue.withLockedValue { queue in
                        (queue.finished ? false : queue.putBackIfOthersWait(rest), queue.turnsGiven)
                    }
                    if putBack { break messages }
                    turnsSeen = given
                }
                handledAny = true
                // Moved out, not copied: a copy would retain every reference the message holds
                // (its payload's storage among them, shared with the event loop that read it).
                let message = round.messages.removeFirst()
                switch outbound?.outboxState(of: message.sender.id) ?? .room {
                case .room:
                    await handle(message, outbound: outbound, handlerFound: &handlerFound)
                case .full:
                    // Not now: the peer is not reading what we made for it already. Its turn
                    // comes back when its outbox drains (``outboxHasRoom()``); in a one-peer
                    // batch, the rest of the batch waits with it, in order.
                    var held: Deque<Inbound> = [message]
                    if round.onePeer { held.append(contentsOf: round.messages) }
                    let parked = queue.withLockedValue { queue -> Bool in
                        guard !queue.finished else { return false }
                        queue.park(held)
                        return true
                    }
                    if parked {
                        // The outbox may have drained between the look above and the park, its
                        // wake-up finding nobody parked: look once more, now that it would.
                        if outbound?.outboxState(of: message.sender.id) == .room { outboxHasRoom() }
                        if round.onePeer { break messages }
                        continue
                    }
                    await handle(message, outbound: outbound, handlerFound: &handlerFound)
                case .disconnected:
                    if message.envelope.id != nil {
                        logger.debug("Dropped a \(LogSafe.text(message.envelope.type, maximumBytes: 80)) request from \(message.sender), which disconnected before it was handled.")
                    } else {
                        await handle(message, outbound: outbound, handlerFound: &handlerFound)
                    }
                }
                credit(message)
            }
        }
    }

    /// A message left the queue (handled or dropped): its bytes count no longer.
    private func credit(_ message: Inbound) {
        let cost = PeerConnectionHandler.cost(of: message.envelope)
        metrics.receiveQueueBytes.decrement(by: Double(cost))
        message.connection.inboundHandled(cost)
        unfinished.subtract(1, ordering: .releasing)
    }

    /// Some peer's outbox drained below its limit: parked peers get turns again.
    func outboxHasRoom() {
        let wake = queue.withLockedValue { queue -> (CheckedContinuation<Round, Never>, Round)? in
            guard !queue.parked.isEmpty else { return nil }
            queue.unparkAll()
            guard let waiting = queue.waiting, !queue.isEmpty, !queue.answeringImmediately else { return nil }
            queue.waiting = nil
            return (waiting, queue.takeRound())
        }
        if let (waiting, batch) = wake { waiting.resume(returning: batch) }
    }

    /// `peer` disconnected: its queued requests are dropped (nobody can receive their replies),
    /// except those that came on `current`, a connection it has again already.
    func peerDisconnected(_ peerID: String, current: PeerConnection?) {
        let dropped = queue.withLockedValue { $0.removeRequests(of: peerID, notOn: current) }
        guard !dropped.isEmpty else { return }
        logger.debug("Dropped \(dropped.count) requests from peer \(LogSafe.text(peerID, maximumBytes: 80)), which disconnected before they were handled.")
        for message in dropped { credit(message) }
    }

    /// The next round of queued messages, waiting for one when there is none; empty once finished.
    nonisolated(nonsending) private func nextRound() async -> Round {
        let ready = queue.withLockedValue { queue -> Round? in
            guard queue.isEmpty else { return queue.takeRound() }
            return queue.finished ? .finished : nil
        }
        if let ready { return ready }
        return await withCheckedContinuation { continuation in
            let ready = queue.withLockedValue { queue -> Round? in
                if !queue.isEmpty { return queue.takeRound() }
                if queue.finished { return .finished }
                queue.waiting = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Runs `message`'s handler and sends its reply. On ``run()``'s executor (`nonisolated(nonsending)`):
    /// a plain `async` method would switch executors on each call, to the one it already runs on.
    nonisolated(nonsending) private func handle(_ message: Inbound, outbound: (any PeerOutbound)?, handlerFound: inout MessageRegistry.Found?) async {
        let envelope = message.envelope
        if let group = envelope.group, !groups.isMember(group) {
            // Sent to a group this side has left (the sender had not heard yet): not delivered.
            logger.debug("Dropped a \(LogSafe.text(envelope.type, maximumBytes: 80)) message from \(message.sender) to group \"\(LogSafe.text(group, maximumBytes: 80))\", which this transceiver is not in.")
            if let id = envelope.id {
                replyWithError("This peer is not in group \"\(LogSafe.text(group, maximumBytes: 80))\".", to: id, of: message, outbound: outbound)
            }
            return
        }
        guard let handler = registry.handler(for: envelope.type, reusing: &handlerFound) else {
            let error = PeerKitError.noHandler(type: envelope.type)
            if let id = envelope.id {
                replyWithError(error.description, to: id, of: message, outbound: outbound)
            } else {
                logger.warning("Dropped a message from \(message.sender): \(error)")
            }
            return
        }
        do {
            let reply = try await handler.handle(envelope, message.sender)
            if let id = envelope.id { answer(id, with: .success(reply), of: message, outbound: outbound) }
        } catch {
            if let id = envelope.id {
                answer(id, with: .failure(error), of: message, outbound: outbound)
            } else if let error = error as? PeerKitError {
                logger.warning("A message from \(message.sender) was not handled: \(error)")
                reportError(error)
            } else {
                logger.warning("The \(LogSafe.text(envelope.type, maximumBytes: 80)) handler failed: \(error)")
            }
        }
    }

    /// Sends the reply to request `id` that its handler returned, or the error it threw: a
    /// ``PeerKitError`` (a payload that did not decode, say) by its description, the handler's
    /// own error as it describes itself.
    private func answer(_ id: String, with result: Result<EncodedMessage?, any Error>, of message: Inbound, outbound: (any PeerOutbound)?) {
        switch result {
        case let .success(reply?):
            metrics.usedType(reply.type).sent(payloadBytes: reply.payload.readableBytes)
            send(reply.frame(replyTo: id), answering: message, outbound: outbound)
        case .success(nil):
            break
        case let .failure(error as PeerKitError):
            replyWithError(error.description, to: id, of: message, outbound: outbound)
        case let .failure(error):
            replyWithError("\(error)", to: id, of: message, outbound: outbound)
        }
    }

    private func replyWithError(_ reason: String, to id: String, of message: Inbound, outbound: (any PeerOutbound)?) {
        send(ConnectionStateMachine.ControlFrame.error(reason: reason, replyTo: id).encode(), answering: message, outbound: outbound)
    }

    /// Sends an answer to the peer that asked, on whichever connection is its own now.
    private func send(_ frame: ByteBuffer, answering message: Inbound, outbound: (any PeerOutbound)?) {
        let sent = outbound?.sendWithoutWaiting(frame, to: message.sender.id) ?? message.connection.send(frame)
        if !sent {
            logger.debug("Dropped the answer to a \(LogSafe.text(message.envelope.type, maximumBytes: 80)) request from \(message.sender), which disconnected before it was answered.")
        }
    }
}
