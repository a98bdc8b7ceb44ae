import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

/// Handlers that run immediately (`respondImmediately(to:using:)`): answered inside the
/// dispatcher's `enqueue`, where the connection's read delivers, only when nothing is ahead of
/// them; the dispatcher's guarantees (one handler at a time, each peer's messages in order,
/// no replies made for a peer that does not read) hold as for every other handler.
@Suite("Immediate handlers in the message dispatcher (no sockets)")
struct ImmediateHandlerTests {
    /// A dispatcher, its registry and an outbox that records the answers.
    struct Harness {
        let registry = MessageRegistry()
        let outbox = RecordingOutbox()
        let groups = GroupDirectory(limits: .init(maximumGroupNameLength: 128, maximumGroupsPerPeer: 64))
        let dispatcher: MessageDispatcher
        /// True while the test itself is inside `enqueue`: a handler that reads it true ran there.
        let insideEnqueue = NIOLockedValueBox(false)
        /// Each handler's record: its peer, its payload and whether it ran inside `enqueue`.
        let handled = NIOLockedValueBox<[String]>([])

        init(logger: Logger = Logger(label: "test")) {
            dispatcher = MessageDispatcher(registry: registry, pending: PendingRequests(), groups: groups, logger: logger) { _ in }
            dispatcher.setOutbound(outbox)
        }

        /// Registers an immediate handler for `type` that records itself and answers `{"ok":1}`.
        func registerImmediate(_ type: String, during: @escaping @Sendable () -> Void = {}) {
            let (handled, inside) = (handled, insideEnqueue)
            registry.register(type, .init(immediately: { envelope, sender in
                let place = inside.withLockedValue { $0 } ? "inline" : "task"
                handled.withLockedValue { $0.append("\(sender.name):\(String(buffer: envelope.payload)):\(place)") }
                during()
                return EncodedMessage(type: "Ok", payload: ByteBuffer(string: #"{"ok":1}"#))
            }))
        }

        /// Registers a one-way handler for "Note" that records "peer:note" in ``handled``.
        func registerNote() {
            let handled = handled
            registry.register("Note", .init { _, sender in
                handled.withLockedValue { $0.append("\(sender.name):note") }
                return nil
            })
        }

        /// `enqueue`, with ``insideEnqueue`` set around it.
        func enqueue(_ envelope: Envelope, from peer: Peer, on connection: PeerConnection) {
            insideEnqueue.withLockedValue { $0 = true }
            dispatcher.enqueue(envelope, from: peer, on: connection)
            insideEnqueue.withLockedValue { $0 = false }
        }

        /// Starts `run()` and returns once it waits for work.
        func startRunning() async -> Task<Void, Never> {
            let dispatcher = dispatcher
            let run = Task { await dispatcher.run() }
            while !dispatcher.isWaitingForWork { await Task.yield() }
            return run
        }
    }

    let a = Peer(id: "A", name: "a", isConnected: true)
    let b = Peer(id: "B", name: "b", isConnected: true)

    func connection() -> PeerConnection {
        PeerConnection(channel: EmbeddedChannel(), direction: .inbound, serviceKey: nil, maximumQueuedInboundBytes: 10_000)
    }

    /// A one-way "Note" (``Harness/registerNote()``).
    static let note = Envelope(type: "Note", id: nil, replyTo: nil, payload: ByteBuffer(string: "{}"))

    func request(_ type: String, _ n: Int, id: String? = nil, group: String? = nil) -> Envelope {
        Envelope(type: type, id: id ?? "r\(n)", replyTo: nil, group: group, payload: ByteBuffer(string: #"{"n":\#(n)}"#))
    }

    @Test("a request is answered inside enqueue when the dispatcher waits for work, and its reply is sent before enqueue returns")
    func answeredInline() async {
        let harness = Harness()
        harness.registerImmediate("Ask")
        let run = await harness.startRunning()
        // A connection whose limit one request exceeds: reading pauses until it is credited.
        let conn = PeerConnection(channel: EmbeddedChannel(), direction: .inbound, serviceKey: nil, maximumQueuedInboundBytes: 10)
        _ = conn.inboundAccepted(PeerConnectionHandler.cost(of: request("Ask", 0)))
        #expect(conn.isReadingPaused)
        harness.enqueue(request("Ask", 0), from: a, on: conn)
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:inline"#])
        let sent = harness.outbox.sent.withLockedValue { $0 }
        #expect(sent.count == 1)
        #expect(sent.first?.contains(#""replyTo":"r0""#) == true)
        #expect(sent.first?.contains(#"{"ok":1}"#) == true)
        // Credited back at once: the connection reads again.
        #expect(!conn.isReadingPaused)
        // Nothing was queued, and the dispatcher still waits.
        #expect(harness.dispatcher.unfinishedCount == 0)
        #expect(harness.dispatcher.isWaitingForWork)
        harness.dispatcher.finish()
        await run.value
    }

    @Test("a read's pipelined requests are answered inline in order; a one-way message among them sends the rest to the queue, in order")
    func pipelinedThenQueued() async {
        let harness = Harness()
        harness.registerImmediate("Ask")
        harness.registerNote()
        let run = await harness.startRunning()
        harness.insideEnqueue.withLockedValue { $0 = true }
        harness.dispatcher.enqueue([request("Ask", 0), request("Ask", 1), Self.note, request("Ask", 3)][...], from: a, on: connection())
        harness.insideEnqueue.withLockedValue { $0 = false }
        harness.dispatcher.finish()
        await run.value
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:inline"#, #"a:{"n":1}:inline"#, "a:note", #"a:{"n":3}:task"#])
        #expect(harness.outbox.sent.withLockedValue { $0 }.count == 3)
    }

    @Test("while another handler runs, a request waits its turn: handlers run one at a time, each peer's messages in order")
    func waitsForRunningHandler() async {
        let harness = Harness()
        harness.registerImmediate("Ask")
        let (started, starting) = AsyncStream.makeStream(of: Void.self)
        let (gate, opening) = AsyncStream.makeStream(of: Void.self)
        let handled = harness.handled
        harness.registry.register("Slow", .init { _, sender in
            starting.yield()
            for await _ in gate { break }
            handled.withLockedValue { $0.append("\(sender.name):slow") }
            return nil
        })
        let run = await harness.startRunning()
        let conn = connection()
        harness.dispatcher.enqueue(Envelope(type: "Slow", id: nil, replyTo: nil, payload: ByteBuffer(string: "{}")), from: a, on: conn)
        for await _ in started { break }
        // The same peer's request, and another peer's, arrive while Slow runs.
        harness.enqueue(request("Ask", 0), from: a, on: conn)
        harness.enqueue(request("Ask", 1), from: b, on: connection())
        #expect(harness.handled.withLockedValue { $0 } == [])
        opening.yield()
        harness.dispatcher.finish()
        await run.value
        #expect(harness.handled.withLockedValue { $0 } == ["a:slow", #"a:{"n":0}:task"#, #"b:{"n":1}:task"#])
    }

    @Test("a request to a group this side is in is answered inside enqueue; one to a group it is not in waits its turn and is refused there")
    func groupRequests() async throws {
        let harness = Harness()
        harness.registerImmediate("Ask")
        try harness.groups.join("kitchen")
        let run = await harness.startRunning()
        harness.enqueue(request("Ask", 0, group: "kitchen"), from: a, on: connection())
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:inline"#])
        #expect(harness.outbox.sent.withLockedValue { $0 }.count == 1)
        harness.enqueue(request("Ask", 1, group: "garden"), from: a, on: connection())
        harness.dispatcher.finish()
        await run.value
        // Not handled anywhere: the dispatcher's task answered it with the reason.
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:inline"#])
        let sent = harness.outbox.sent.withLockedValue { $0 }
        #expect(sent.count == 2)
        #expect(sent.first?.contains(#""replyTo":"r0""#) == true)
        #expect(sent.last?.contains(#""type":"peerkit.error""#) == true)
        #expect(sent.last?.contains(#"This peer is not in group \"garden\"."#) == true)
    }

    @Test("a request whose peer has messages queued waits behind them, though the dispatcher waits for work")
    func waitsBehindItsPeersQueue() async {
        let harness = Harness()
        harness.registerImmediate("Ask")
        harness.registerNote()
        let run = await harness.startRunning()
        // A's outbox is full: its note is parked, queued, and the dispatcher waits for work.
        harness.outbox.fullPeers.withLockedValue { $0 = ["A"] }
        harness.dispatcher.enqueue(Self.note, from: a, on: connection())
        while !harness.dispatcher.isWaitingForWork { await Task.yield() }
        // The outbox drained, and the wake-up has not come yet: the request has room, but the
        // note is still ahead of it.
        harness.outbox.fullPeers.withLockedValue { $0 = [] }
        harness.enqueue(request("Ask", 0), from: a, on: connection())
        #expect(harness.handled.withLockedValue { $0 } == [])
        harness.dispatcher.outboxHasRoom()
        while harness.handled.withLockedValue({ $0.count }) < 2 { await Task.yield() }
        harness.dispatcher.finish()
        await run.value
        #expect(harness.handled.withLockedValue { $0 } == ["a:note", #"a:{"n":0}:task"#])
    }

    @Test("a message that arrives while an immediate handler runs does not wake the dispatcher until it returns")
    func noHandlerBesideIt() async {
        let harness = Harness()
        let dispatcher = harness.dispatcher
        let conn = connection()
        let b = b
        let wokenDuring = NIOLockedValueBox<Bool?>(nil)
        harness.registerImmediate("Ask") {
            // Another connection (another loop, say) delivers meanwhile.
            dispatcher.enqueue(Self.note, from: b, on: conn)
            wokenDuring.withLockedValue { $0 = !dispatcher.isWaitingForWork }
        }
        harness.registerNote()
        let handled = harness.handled
        let run = await harness.startRunning()
        harness.enqueue(request("Ask", 0), from: a, on: conn)
        #expect(wokenDuring.withLockedValue { $0 } == false)
        // Woken once the handler returned: the note is handled after it.
        while handled.withLockedValue({ $0.count }) < 2 { await Task.yield() }
        dispatcher.finish()
        await run.value
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:inline"#, "b:note"])
    }

    @Test("a read's requests are answered inline up to the dispatcher's batch, and none more once another peer's message waits: the rest wait their turn")
    func fairAsBatches() async {
        let harness = Harness()
        let dispatcher = harness.dispatcher
        let (a, b) = (a, b)
        let conn = connection()
        harness.registerImmediate("Ask")
        // The handler of "Cut" delivers another peer's note meanwhile (another loop, say).
        harness.registerImmediate("Cut") {
            dispatcher.enqueue(Self.note, from: b, on: conn)
        }
        harness.registerNote()
        let run = await harness.startRunning()
        let batch = MessageDispatcher.maximumBatch
        harness.insideEnqueue.withLockedValue { $0 = true }
        dispatcher.enqueue((0...batch).map { request("Ask", $0) }[...], from: a, on: conn)
        harness.insideEnqueue.withLockedValue { $0 = false }
        while harness.handled.withLockedValue({ $0.count }) < batch + 1 { await Task.yield() }
        let first = harness.handled.withLockedValue { $0 }
        #expect(first.filter { $0.hasSuffix(":inline") }.count == batch)
        #expect(first.last == #"a:{"n":\#(batch)}:task"#)

        harness.handled.withLockedValue { $0 = [] }
        harness.insideEnqueue.withLockedValue { $0 = true }
        dispatcher.enqueue([request("Cut", 0), request("Ask", 1)][...], from: a, on: conn)
        harness.insideEnqueue.withLockedValue { $0 = false }
        while harness.handled.withLockedValue({ $0.count }) < 3 { await Task.yield() }
        dispatcher.finish()
        await run.value
        // B's note, queued while Cut was answered, goes before the rest of A's read.
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:inline"#, "b:note", #"a:{"n":1}:task"#])
    }

    @Test("a request from a peer whose outbox is full is not answered inline: it waits, parked, until the outbox drains")
    func fullOutboxWaits() async {
        let harness = Harness()
        harness.registerImmediate("Ask")
        harness.outbox.fullPeers.withLockedValue { $0 = ["A"] }
        let run = await harness.startRunning()
        harness.enqueue(request("Ask", 0), from: a, on: connection())
        #expect(harness.handled.withLockedValue { $0 } == [])
        #expect(harness.outbox.sent.withLockedValue { $0 } == [])
        harness.outbox.fullPeers.withLockedValue { $0 = [] }
        harness.dispatcher.outboxHasRoom()
        while harness.handled.withLockedValue({ $0.isEmpty }) { await Task.yield() }
        harness.dispatcher.finish()
        await run.value
        #expect(harness.handled.withLockedValue { $0 } == [#"a:{"n":0}:task"#])
        #expect(harness.outbox.sent.withLockedValue { $0 }.count == 1)
    }

    @Test("an immediate handler that runs longer than 50 ms is named in one warning per wire key, however often it runs long")
    func slowHandlerWarnedOnce() async {
        let log = CapturedLog()
        let harness = Harness(logger: log.logger)
        // Holds its thread as a handler that blocks would: the warning is about the time it took.
        harness.registerImmediate("Ask") {
            let until = ContinuousClock.now + .milliseconds(60)
            while ContinuousClock.now < until {}
        }
        let run = await harness.startRunning()
        for n in 0..<3 { harness.enqueue(request("Ask", n), from: a, on: connection()) }
        #expect(harness.handled.withLockedValue { $0 }.allSatisfy { $0.hasSuffix(":inline") })
        let warnings = log.messages(containing: "immediate handler", atLeast: .warning)
        #expect(warnings.count == 1)
        #expect(warnings.first?.hasPrefix("The immediate handler of Ask requests ran for ") == true)
        #expect(warnings.first?.contains("respond(to:using:)") == true)
        harness.dispatcher.finish()
        await run.value
    }

    @Test("an immediate handler's error is sent to the requester as peerkit.error, with the error's own words")
    func errorAnswered() async {
        struct OutOfStock: Error, CustomStringConvertible {
            var description: String { "The item is out of stock." }
        }
        let harness = Harness()
        harness.registry.register("Ask", .init(immediately: { _, _ in throw OutOfStock() }))
        let run = await harness.startRunning()
        harness.enqueue(request("Ask", 0), from: a, on: connection())
        let sent = harness.outbox.sent.withLockedValue { $0 }
        #expect(sent.count == 1)
        #expect(sent.first?.contains(#""type":"peerkit.error""#) == true)
        #expect(sent.first?.contains("The item is out of stock.") == true)
        harness.dispatcher.finish()
        await run.value
    }
}

/// An outbox that records what is sent through it, full for ``fullPeers``.
final class RecordingOutbox: PeerOutbound {
    let fullPeers = NIOLockedValueBox<Set<String>>([])
    /// Each frame sent, as text.
    let sent = NIOLockedValueBox<[String]>([])

    func outboxState(of peerID: String) -> OutboxState {
        fullPeers.withLockedValue { $0.contains(peerID) } ? .full : .room
    }

    func sendWithoutWaiting(_ frame: ByteBuffer, to peerID: String) -> Bool {
        sent.withLockedValue { $0.append(String(buffer: frame)) }
        return true
    }
}
