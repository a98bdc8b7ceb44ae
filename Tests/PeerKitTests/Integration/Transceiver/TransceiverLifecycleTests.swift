import Dispatch
import Logging
import NIOCore
import NIOPosix
import PeerKit
import ServiceLifecycle
import Synchronization
import Testing

/// `run()` is the structured lifecycle; `start()`/`resume()`/`stop()` the convenience on top.
@Suite("Transceiver lifecycle")
struct TransceiverLifecycleTests {
    /// A server on loopback and a client dialling it; the test decides how the server runs.
    private func clientOf(_ server: PeerTransceiver, name: String = "client") async throws -> (PeerTransceiver, AsyncStream<PeerEvent>) {
        var configuration = loopbackConfiguration(serviceType: server.configuration.serviceType, name: name, peers: [try endpoint(of: server)])
        configuration.advertises = false
        let client = PeerTransceiver(configuration: configuration)
        let events = client.events()
        try await client.start()
        _ = try await client.waitForPeer(timeout: .seconds(20))
        return (client, events)
    }

    private func waitUntilStarted(_ events: AsyncStream<PeerEvent>) async throws {
        _ = try await nextEvent(events, "started") { if case .started = $0 { return true } else { return false } }
    }

    @Test("run() in a ServiceGroup serves peers until a graceful shutdown, which says bye to them and returns")
    func serviceGroupShutdown() async throws {
        let server = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "server"))
        let serverEvents = server.events()
        let group = ServiceGroup(services: [server], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await waitUntilStarted(serverEvents)
        let (client, clientEvents) = try await clientOf(server)
        defer { client.stop() }

        await group.triggerGracefulShutdown()
        try await within(20, "the group's run to return") { try await running.value }
        let disconnected = try await nextEvent(clientEvents, "the server's bye") {
            if case .peerDisconnected = $0 { return true } else { return false }
        }
        #expect(disconnected == .peerDisconnected(Peer(id: server.peerID, name: "server", isConnected: false), reason: nil))
        _ = try await nextEvent(serverEvents, "stopped") { $0 == .stopped }
        #expect(server.listeningPort == nil)
    }

    @Test("cancelling the task that runs run() stops the transceiver; stop() ends run() too")
    func cancellationAndStopEndTheRun() async throws {
        let server = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "server"))
        let firstEvents = server.events()
        let cancelled = Task { try await server.run() }
        try await waitUntilStarted(firstEvents)
        cancelled.cancel()
        try await within(20, "run() to return after cancellation") { try await cancelled.value }
        #expect(server.listeningPort == nil)

        let events = server.events()
        let stopped = Task { try await server.run() }  // and it can run again
        try await waitUntilStarted(events)
        server.stop()
        try await within(20, "run() to return after stop()") { try await stopped.value }
    }

    @Test("run() while the transceiver runs throws alreadyRunning and leaves the running one alone")
    func runTwice() async throws {
        let server = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "server"))
        try await server.start()
        defer { server.stop() }
        await #expect(throws: PeerKitError.alreadyRunning) { try await server.run() }
        #expect(server.listeningPort != nil)
    }

    @Test("run() throws what start() throws, at once")
    func runThrowsStartErrors() async throws {
        let invalid = PeerTransceiver(serviceType: "not a service type!")
        await #expect(throws: PeerKitError.self) { try await invalid.run() }
    }

    @Test("a resumed transceiver that is let go stops: its background run does not keep it alive")
    func letGoStops() async throws {
        let anchor = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "anchor"))
        try await anchor.start()
        defer { anchor.stop() }
        let anchorEvents = anchor.events()
        weak var released: PeerTransceiver?
        do {
            let (client, _) = try await clientOf(anchor, name: "transient")
            released = client
        }
        _ = try await nextEvent(anchorEvents, "the let-go client's bye") {
            if case .peerDisconnected = $0 { return true } else { return false }
        }
        #expect(released == nil)
    }

    @Test("closures see the events of each run, across a restart")
    func callbacksAcrossRestarts() async throws {
        let server = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "server"))
        let connected = Inbox<String>()
        server.peerConnected = { peer in connected.put(peer.name) }
        try await server.start()
        let (first, _) = try await clientOf(server, name: "first")
        #expect(try await connected.take(1) == ["first"])
        first.stop()
        server.stop()
        try await server.start()
        defer { server.stop() }
        let (second, _) = try await clientOf(server, name: "second")
        defer { second.stop() }
        #expect(try await connected.take(1) == ["second"])
    }

    /// What `peerkit send` does: start, send once, shut down. Several senders at once load the
    /// machine, which once let a dial's outcome be handled after its handshake: the stopping
    /// sender then closed the connection without its bye, and the message was lost (issue 29).
    @Test("senders that shut down right after sending deliver every message, round after round")
    func sendThenShutdown() async throws {
        let receiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "receiver"))
        let received = Inbox<Int>()
        receiver.receive(SentBeforeShutdown.self) { message, _ in received.put(message.number) }
        try await receiver.start()
        defer { receiver.stop() }
        let senders = 4, rounds = 12
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    for round in 0..<rounds {
                        var configuration = loopbackConfiguration(serviceType: receiver.configuration.serviceType, name: "sender \(sender)", peers: [try endpoint(of: receiver)])
                        configuration.advertises = false
                        let client = PeerTransceiver(configuration: configuration)
                        try await client.start()
                        let peer = try await client.waitForPeer(timeout: .seconds(20))
                        try await client.send(SentBeforeShutdown(number: sender * rounds + round), to: [peer])
                        await client.shutdown()
                    }
                }
            }
            try await group.waitForAll()
        }
        let numbers = try await received.take(senders * rounds)
        #expect(numbers.sorted() == Array(0..<(senders * rounds)))
    }

    /// A side that stops with bytes of the peer's unread closed fully after its bye: the kernel
    /// answered with a reset, which discards what was not transmitted yet, and a peer that saw the
    /// reset took the stop for a lost link (with sessions on, it waited the resume window for a
    /// peer that had said bye). It now shuts its output after the bye and reads until the peer closes.
    @Test("a transceiver that stops while a peer keeps sending says bye and ends with a FIN, not a reset")
    func stopWhileThePeerSends() async throws {
        let serviceType = randomServiceType()
        let server = PeerTransceiver(configuration: rawPeerConfiguration(serviceType: serviceType, name: "server"))
        let handled = Mutex(0)
        server.receive(Note.self) { _, _ in handled.withLock { $0 += 1 } }
        try await server.start()
        let raw = try await RawPeer(connectingTo: try endpoint(of: server))
        try await raw.sayHello(serviceType: serviceType)
        try await within(20, "the raw peer to connect") {
            while server.connectedPeers.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        }
        let sending = Task { [channel = raw.channel] in
            // Until the connection refuses writes: they reach the server's socket before and
            // after it stops.
            let note = ByteBuffer.frame(#"{"type":"Note","payload":{"text":"still sending"}}"#)
            while (try? await channel.writeAndFlush(note)) != nil {}
        }
        defer {
            raw.close()  // ends the sending task when the test failed before the server closed
            server.stop()
        }
        try await within(20, "the raw peer to be sending") {
            while handled.withLock({ $0 }) < 10 { try await Task.sleep(for: .milliseconds(10)) }
        }
        await server.shutdown()
        var frames: [String] = []
        while let frame = await raw.nextFrame(skipping: [#"{"type":"peerkit.ping""#, #"{"type":"peerkit.hello""#]) { frames.append(frame) }
        await sending.value
        #expect(frames.last?.hasPrefix(#"{"type":"peerkit.bye""#) == true, "the last frame is the server's bye: \(frames.suffix(2))")
        #expect(raw.failure == nil, "the connection ended with a FIN, not \(raw.failure ?? "")")
    }

    /// A program that starts a transceiver on loops of its own shuts it down, then the loops. The
    /// transceiver's run (here on an executor that holds it, as a busy machine may) resumes only
    /// after that. It used to wait for the closes with `EventLoopFuture.get()`, which hops to the
    /// future's loop: NIO printed "Cannot schedule tasks on an EventLoop that has already shut
    /// down", and the run never returned.
    @Test("after shutdown() the program may shut its event loops down: the run, resuming later, schedules nothing on them and returns")
    func loopsShutDownAfterShutdown() async throws {
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = loopbackConfiguration(serviceType: randomServiceType(), name: "server")
        configuration.eventLoopGroup = loops
        let server = PeerTransceiver(configuration: configuration)
        let serverEvents = server.events()
        let executor = HoldingExecutor()
        let returned = Mutex(false)
        let running = Task(executorPreference: executor) {
            try? await server.run()
            returned.withLock { $0 = true }
        }
        try await waitUntilStarted(serverEvents)
        let (client, _) = try await clientOf(server)
        defer { client.stop() }

        executor.hold()
        await server.shutdown()
        try await loops.shutdownGracefully()
        executor.release()
        // Not `running.value` within a time limit: a run that never returns would hold the test up.
        try await within(20, "the run to return") {
            while !returned.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        }
        await running.value
    }
}

/// A task executor that runs jobs on Dispatch's global queue, or keeps them from ``hold()`` to
/// ``release()``: a task on it that resumes meanwhile runs only at the release.
private final class HoldingExecutor: TaskExecutor {
    private let held = Mutex<[UnownedJob]?>(nil)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let runsNow = held.withLock { held -> Bool in
            guard held != nil else { return true }
            held?.append(job)
            return false
        }
        if runsNow { run(job) }
    }

    func hold() {
        held.withLock { $0 = $0 ?? [] }
    }

    func release() {
        let jobs = held.withLock { held -> [UnownedJob] in
            defer { held = nil }
            return held ?? []
        }
        for job in jobs { run(job) }
    }

    private func run(_ job: UnownedJob) {
        DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

private struct SentBeforeShutdown: Codable, Sendable, PeerMessage {
    static var messageType: String { "test.SentBeforeShutdown" }
    var number: Int
}
