import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

@Suite("Message dispatcher (no sockets)")
struct MessageDispatcherTests {
    func connection() -> PeerConnection {
        PeerConnection(channel: EmbeddedChannel(), direction: .inbound, serviceKey: nil, maximumQueuedInboundBytes: 10_000)
    }

    func envelope(_ type: String, _ n: Int) -> Envelope {
        Envelope(type: type, id: nil, replyTo: nil, payload: ByteBuffer(string: #"{"n":\#(n)}"#))
    }

    @Test("one peer's burst delays another peer's message by at most one of its own per turn")
    func fairness() async {
        let registry = MessageRegistry()
        let handled = NIOLockedValueBox<[String]>([])
        for type in ["Flood", "Request"] {
            registry.register(type, .init { envelope, sender in
                handled.withLockedValue { $0.append("\(sender.name):\(String(buffer: envelope.payload))") }
                return nil
            })
        }
        let dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64)), logger: Logger(label: "test")) { _ in }
        let flooder = connection(), asker = connection()
        let a = Peer(id: "A", name: "a", isConnected: true), b = Peer(id: "B", name: "b", isConnected: true)
        for n in 0..<1000 { dispatcher.enqueue(envelope("Flood", n), from: a, on: flooder) }
        dispatcher.enqueue(envelope("Request", 0), from: b, on: asker)
        dispatcher.enqueue(envelope("Request", 1), from: b, on: asker)
        dispatcher.finish()
        await dispatcher.run()
        let order = handled.withLockedValue { $0 }
        #expect(order.count == 1002)
        #expect(Array(order.prefix(4)) == [#"a:{"n":0}"#, #"b:{"n":0}"#, #"a:{"n":1}"#, #"b:{"n":1}"#])
        // Each peer's own messages keep their order.
        let flood = order.filter { $0.hasPrefix("a:") }
        #expect(flood == (0..<1000).map { #"a:{"n":\#($0)}"# })
    }

    @Test("a peer whose message arrives while another peer's batch is handled waits for at most one more of that peer's messages")
    func fairnessDuringBatch() async {
        let registry = MessageRegistry()
        let handled = NIOLockedValueBox<[String]>([])
        let total = MessageDispatcher.maximumBatch * 2 + 1
        let (done, allHandled) = AsyncStream.makeStream(of: Void.self)
        let dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64)), logger: Logger(label: "test")) { _ in }
        let flooder = connection(), asker = connection()
        let a = Peer(id: "A", name: "a", isConnected: true), b = Peer(id: "B", name: "b", isConnected: true)
        let record: @Sendable (String) -> Void = { entry in
            if handled.withLockedValue({ $0.append(entry); return $0.count }) == total { allHandled.yield() }
        }
        registry.register("Flood", .init { envelope, sender in
            let text = String(buffer: envelope.payload)
            record("\(sender.name):\(text)")
            // B's request arrives in the middle of A's batch.
            if text == #"{"n":10}"# { dispatcher.enqueue(self.envelope("Request", 0), from: b, on: asker) }
            return nil
        })
        registry.register("Request", .init { envelope, sender in
            record("\(sender.name):\(String(buffer: envelope.payload))")
            return nil
        })
        // A alone has messages: its turn takes a batch of them.
        for n in 0..<(MessageDispatcher.maximumBatch * 2) { dispatcher.enqueue(envelope("Flood", n), from: a, on: flooder) }
        let run = Task { await dispatcher.run() }
        for await _ in done { break }
        dispatcher.finish()
        await run.value
        let order = handled.withLockedValue { $0 }
        #expect(order.count == total)
        // As with one message per turn: the message in hand, then A's next turn, then B.
        #expect(order.firstIndex(of: #"b:{"n":0}"#) == 12)
        let flood = order.filter { $0.hasPrefix("a:") }
        #expect(flood == (0..<(MessageDispatcher.maximumBatch * 2)).map { #"a:{"n":\#($0)}"# })
    }

    @Test("a batch whose peer's outbox fills waits, in order, until it drains")
    func batchParkedInOrder() async {
        let registry = MessageRegistry()
        let handled = NIOLockedValueBox<[Int]>([])
        let (refused, refusal) = AsyncStream.makeStream(of: Void.self)
        let outbox = TestOutbox(refusal: refusal)
        let dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64)), logger: Logger(label: "test")) { _ in }
        dispatcher.setOutbound(outbox)
        registry.register("Flood", .init { envelope, _ in
            let n = Int(String(buffer: envelope.payload).filter(\.isNumber)) ?? -1
            handled.withLockedValue { $0.append(n) }
            // The fifth message's handler fills the peer's outbox.
            if n == 4 { outbox.full.withLockedValue { $0 = true } }
            return nil
        })
        let a = Peer(id: "A", name: "a", isConnected: true)
        let flooder = connection()
        for n in 0..<20 { dispatcher.enqueue(envelope("Flood", n), from: a, on: flooder) }
        let run = Task { await dispatcher.run() }
        // The sixth message found the outbox full: the rest of the batch waits.
        for await _ in refused { break }
        #expect(handled.withLockedValue { $0 } == Array(0..<5))
        outbox.full.withLockedValue { $0 = false }
        dispatcher.outboxHasRoom()
        dispatcher.finish()
        await run.value
        #expect(handled.withLockedValue { $0 } == Array(0..<20))
    }

    @Test("a parked peer's next message, arriving while the dispatcher waits for work, does not end the dispatcher: another peer's message is still handled")
    func parkedPeersMessageWhileWaiting() async {
        let registry = MessageRegistry()
        let handled = NIOLockedValueBox<[String]>([])
        let (refused, refusal) = AsyncStream.makeStream(of: Void.self)
        let outbox = TestOutbox(refusal: refusal)
        outbox.fullPeers.withLockedValue { $0 = ["A"] }
        let dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64)), logger: Logger(label: "test")) { _ in }
        dispatcher.setOutbound(outbox)
        registry.register("Request", .init { envelope, sender in
            handled.withLockedValue { $0.append("\(sender.name):\(String(buffer: envelope.payload))") }
            return nil
        })
        let a = Peer(id: "A", name: "a", isConnected: true), b = Peer(id: "B", name: "b", isConnected: true)
        let attacker = connection(), asker = connection()
        dispatcher.enqueue(envelope("Request", 0), from: a, on: attacker)
        let run = Task { await dispatcher.run() }
        // A's outbox is full: its message waits, A is parked, and the dispatcher waits for work.
        for await _ in refused { break }
        while !dispatcher.isWaitingForWork { await Task.yield() }
        // A's next message gives A no turn (it is parked): it must not wake the dispatcher with
        // an empty round, which ended it (and every later message waited for good).
        dispatcher.enqueue(envelope("Request", 1), from: a, on: attacker)
        dispatcher.enqueue(envelope("Request", 0), from: b, on: asker)
        while handled.withLockedValue({ $0.isEmpty }), dispatcher.isRunning { await Task.yield() }
        dispatcher.finish()
        await run.value
        #expect(handled.withLockedValue { $0 } == [#"b:{"n":0}"#])
    }

    @Test("each handled message is credited back to its connection, which resumes reading")
    func credit() async {
        let registry = MessageRegistry()
        registry.register("Flood", .init { _, _ in nil })
        let dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64)), logger: Logger(label: "test")) { _ in }
        let flooder = connection()
        let a = Peer(id: "A", name: "a", isConnected: true)
        for n in 0..<100 {
            let message = envelope("Flood", n)
            _ = flooder.inboundAccepted(PeerConnectionHandler.cost(of: message))
            dispatcher.enqueue(message, from: a, on: flooder)
        }
        #expect(flooder.isReadingPaused)
        dispatcher.finish()
        await dispatcher.run()
        #expect(!flooder.isReadingPaused)
    }

    @Test("a handler registered or removed while messages of its type are handled applies from the next message on")
    func handlerReplacedMidStream() async {
        // The dispatcher keeps the last message's handler for the next of the same type
        // (MessageRegistry.Found); a change to the registry must end that at once.
        let registry = MessageRegistry()
        let handled = NIOLockedValueBox<[String]>([])
        let second = MessageRegistry.Handler { envelope, _ in
            let text = String(buffer: envelope.payload)
            handled.withLockedValue { $0.append("second \(text)") }
            if text == #"{"n":4}"# { registry.remove("Note") }
            return nil
        }
        registry.register("Note", .init { envelope, _ in
            let text = String(buffer: envelope.payload)
            handled.withLockedValue { $0.append("first \(text)") }
            if text == #"{"n":2}"# { registry.register("Note", second) }
            return nil
        })
        let dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64)), logger: Logger(label: "test")) { _ in }
        let a = Peer(id: "A", name: "a", isConnected: true), on = connection()
        for n in 0..<7 { dispatcher.enqueue(envelope("Note", n), from: a, on: on) }
        dispatcher.finish()
        await dispatcher.run()
        #expect(handled.withLockedValue { $0 } == [
            #"first {"n":0}"#, #"first {"n":1}"#, #"first {"n":2}"#, #"second {"n":3}"#, #"second {"n":4}"#,
        ])
    }
}

@Suite("Pending requests (no sockets)")
struct PendingRequestsTests {
    @Test("a request cancelled before its continuation is attached ends at once, not at its timeout")
    func cancelledBeforeAttach() async {
        let pending = PendingRequests()
        pending.register(id: "1", peerID: "B")
        // The cancellation handler runs first, as it can when the task is already cancelled.
        pending.fail(id: "1", with: CancellationError())
        let outcome: Result<Envelope, any Error> = await withCheckedContinuation { done in
            Task {
                do {
                    let reply = try await withCheckedThrowingContinuation { continuation in
                        if let ended = pending.attach(id: "1", continuation: continuation) {
                            continuation.resume(with: ended)
                        }
                    }
                    done.resume(returning: .success(reply))
                } catch {
                    done.resume(returning: .failure(error))
                }
            }
        }
        #expect(throws: CancellationError.self) { try outcome.get() }
    }

    @Test("a reply is accepted only from the peer the request went to, and only once")
    func replyFromRightPeer() async throws {
        let pending = PendingRequests()
        pending.register(id: "7", peerID: "B")
        let reply = Envelope(type: "Answer", id: nil, replyTo: "7", payload: ByteBuffer(string: "{}"))
        let result: Envelope = try await withCheckedThrowingContinuation { continuation in
            #expect(pending.attach(id: "7", continuation: continuation) == nil)
            #expect(!pending.resolve(reply, from: "C"))
            #expect(pending.resolve(reply, from: "B"))
            #expect(!pending.resolve(reply, from: "B"))
        }
        #expect(result == reply)
    }

    @Test("a reply that comes before the caller waits is kept for it; a later failure does not replace it")
    func replyBeforeAttach() async throws {
        let pending = PendingRequests()
        pending.register(id: "5", peerID: "B")
        let reply = Envelope(type: "Answer", id: nil, replyTo: "5", payload: ByteBuffer(string: "{}"))
        #expect(!pending.resolve(reply, from: "C"), "a reply from another peer is not taken")
        #expect(pending.resolve(reply, from: "B"))
        #expect(!pending.resolve(reply, from: "B"), "only once")
        pending.fail(id: "5", with: CancellationError())
        let result: Envelope = try await withCheckedThrowingContinuation { continuation in
            if let ended = pending.attach(id: "5", continuation: continuation) { continuation.resume(with: ended) }
        }
        #expect(result == reply)
    }

    @Test("a disconnection before the continuation is attached fails the request with its reason")
    func disconnectedBeforeAttach() async {
        let pending = PendingRequests()
        pending.register(id: "3", peerID: "B")
        pending.failAll(peerID: "B", with: PeerKitError.connectionClosed(peer: "b"))
        do {
            _ = try await withCheckedThrowingContinuation { continuation in
                if let ended = pending.attach(id: "3", continuation: continuation) { continuation.resume(with: ended) }
            }
            Issue.record("the request should have failed")
        } catch {
            #expect(error as? PeerKitError == .connectionClosed(peer: "b"))
        }
    }
}

/// An outbox that is full while ``full`` says so (or for ``fullPeers``), and tells `refusal` each time it says so.
private final class TestOutbox: PeerOutbound {
    let full = NIOLockedValueBox(false)
    /// Peers whose outbox is full whatever ``full`` says.
    let fullPeers = NIOLockedValueBox<Set<String>>([])
    private let refusal: AsyncStream<Void>.Continuation

    init(refusal: AsyncStream<Void>.Continuation) {
        self.refusal = refusal
    }

    func outboxState(of peerID: String) -> OutboxState {
        guard full.withLockedValue({ $0 }) || fullPeers.withLockedValue({ $0.contains(peerID) }) else { return .room }
        refusal.yield()
        return .full
    }

    func sendWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool { true }
}
