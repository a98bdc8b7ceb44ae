import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import PeerKit

/// Where handlers run (`PeerConfiguration.handlerExecutor`): off the event loops by default, so
/// that a handler that blocks holds up no connection; on one loop when asked, so that a request
/// crosses no thread.
@Suite("Handler executors over loopback TCP")
struct HandlerExecutorTests {
    struct Block: Codable, Sendable { var seconds: Double }

    @Test("by default a handler that blocks its thread for 5 s gets no peer disconnected: heartbeats go on")
    func blockingHandlerKeepsHeartbeats() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        // Longer than twice the peer timeout (2.5 s): a loop held as long would lose both peers.
        let blocked = Inbox<String>()
        hub.receive(Block.self) { block, _ in
            usleep(UInt32(block.seconds * 1_000_000))  // blocks the handler's thread itself
            blocked.put("unblocked")
        }
        let notes = Inbox<String>()
        hub.receive(Note.self) { note, _ in notes.put(note.text) }
        let losses = NIOLockedValueBox<[String]>([])
        let watchers = [hub, spokes[0], spokes[1]].map { transceiver in
            let events = transceiver.events()
            let name = transceiver.configuration.peerName
            return Task {
                for await event in events {
                    switch event {
                    case let .peerDisconnected(peer, reason), let .peerSuspended(peer, reason):
                        losses.withLockedValue { $0.append("\(name) lost \(peer.name): \(reason.map { "\($0)" } ?? "no reason")") }
                    default:
                        break
                    }
                }
            }
        }
        defer { watchers.forEach { $0.cancel() } }

        let hubPeer = try #require(spokes[0].connectedPeers.first)
        try await spokes[0].send(Block(seconds: 5), to: [hubPeer])
        // Sent while the handler blocks: handled after it, on a connection that stayed up.
        try await spokes[1].send(Note(text: "while blocked"), to: spokes[1].connectedPeers)
        #expect(try await blocked.take(1, within: 30) == ["unblocked"])
        #expect(try await notes.take(1, within: 20) == ["while blocked"])
        #expect(losses.withLockedValue { $0 } == [])
        #expect(hub.connectedPeers.count == 2)
    }

    @Test("on an EventLoopTaskExecutor, handlers run on the transceiver's loop and a request made from it resumes there")
    func oneLoop() async throws {
        let serviceType = randomServiceType()
        let echoLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let askLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let echoExecutor = EventLoopTaskExecutor(echoLoops.any())
        let askExecutor = EventLoopTaskExecutor(askLoops.any())

        var echoConfiguration = loopbackConfiguration(serviceType: serviceType, name: "echo")
        echoConfiguration.eventLoopGroup = echoLoops
        echoConfiguration.handlerExecutor = echoExecutor
        let echo = PeerTransceiver(configuration: echoConfiguration)
        let echoLoop = echoExecutor.eventLoop
        echo.respond(to: Question.self) { question, sender in
            Answer(text: "\(question.text): handler on the loop \(echoLoop.inEventLoop)", from: sender.name)
        }
        // run(), not start(): its return says that no task of the transceiver is left on the loop.
        let echoEvents = echo.events()
        let echoRun = Task { try await echo.run() }
        _ = try await nextEvent(echoEvents, "the echo side to start") { if case .started = $0 { true } else { false } }

        var askConfiguration = loopbackConfiguration(serviceType: serviceType, name: "asker", peers: [try endpoint(of: echo)])
        askConfiguration.eventLoopGroup = askLoops
        askConfiguration.handlerExecutor = askExecutor
        let asker = PeerTransceiver(configuration: askConfiguration)
        let askerEvents = asker.events()
        let askerRun = Task { try await asker.run() }
        let connected = try await nextEvent(askerEvents, "the asker to connect") { if case .peerConnected = $0 { true } else { false } }
        guard case let .peerConnected(peer) = connected else {
            Issue.record("The asker's first connection event was \(connected), not peerConnected.")
            return
        }

        let askLoop = askExecutor.eventLoop
        let (answers, resumedOnLoop) = try await withTaskExecutorPreference(askExecutor) {
            var answers: [String] = []
            var resumedOnLoop = true
            for index in 0..<50 {
                let answer = try await asker.request(Question(text: "\(index)"), to: peer, expecting: Answer.self, timeout: generousRequestTimeout)
                answers.append(answer.text)
                resumedOnLoop = resumedOnLoop && askLoop.inEventLoop
            }
            return (answers, resumedOnLoop)
        }
        #expect(answers == (0..<50).map { "\($0): handler on the loop true" })
        #expect(resumedOnLoop)

        // Their byes and closes done before the loops shut down (see withOwnLoops).
        await asker.shutdown()
        await echo.shutdown()
        try await askerRun.value
        try await echoRun.value
        try await askLoops.shutdownGracefully()
        try await echoLoops.shutdownGracefully()
    }
}
