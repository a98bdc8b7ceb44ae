import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
import Testing
@testable import PeerKit

/// A TCP proxy on 127.0.0.1 that forwards one direction at a limited rate (the other at full
/// speed), with small socket buffers, like a slow link: a Python process, so the link's pace does
/// not depend on the transceivers' event loops.
final class ThrottlingProxy {
    let port: Int
    private let process: Process

    static let script = #"""
    import signal, socket, sys, threading, time
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    target, rate = int(sys.argv[1]), float(sys.argv[2])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    print(listener.getsockname()[1], flush=True)
    def pump(src, dst, throttle):
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                dst.sendall(data)
                if throttle:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", target))
        for s in (client, upstream):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()
    """#

    /// Forwards connections to `target`, client-to-target at `bytesPerSecond`.
    init(to target: Int, bytesPerSecond: Int) async throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, String(target), String(bytesPerSecond)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let handle = output.fileHandleForReading
        let line = try await within(20, "the proxy's port") { await handle.readLineOnOwnThread() }
        guard let port = Int(line) else { throw TimedOut(what: "a port from the proxy (it said \"\(line)\")") }
        self.port = port
    }

    func stop() {
        // SIGKILL: a signal disposition inherited as ignored cannot keep the proxy alive.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

@Suite("Resources over a throttled link")
struct ResourceThrottledLinkTests {
    @Test("over a 4 MiB/s link a 20 MiB resource completes, the peer stays connected, and requests are answered meanwhile")
    func throttled() async throws {
        let serviceType = randomServiceType()
        let receiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "receiver"))
        try await receiver.start()
        let proxy = try await ThrottlingProxy(to: try #require(receiver.listeningPort), bytesPerSecond: 4 << 20)
        defer { proxy.stop() }
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "sender", peers: [PeerEndpoint(host: "127.0.0.1", port: proxy.port)])
        configuration.advertises = false
        let sender = PeerTransceiver(configuration: configuration)
        let events = sender.events()
        try await sender.start()
        defer { sender.stop(); receiver.stop() }
        let peer = try await sender.waitForPeer(timeout: .seconds(20))
        receiver.respond(to: Question.self) { question, _ in Answer(text: question.text, from: "receiver") }
        receiver.receiveResources(named: "slow") { resource in for try await _ in resource.chunks {} }
        let disconnections = Task {
            for await event in events { if case .peerDisconnected = event { return true } }
            return false
        }

        let total: Int64 = 20 << 20
        let started = ContinuousClock.now
        let transfer = try await sender.send(resource: .chunks(PatternBytes(total: total), size: total), named: "slow", to: peer)
        let done = NIOLockedValueBox(false)
        let transferTask = Task {
            defer { done.withLockedValue { $0 = true } }
            try await transfer.finished()
        }
        var answered = 0
        var slowest = Duration.zero
        while !done.withLockedValue({ $0 }), ContinuousClock.now - started < .seconds(90) {
            let asked = ContinuousClock.now
            let answer = try await sender.request(Question(text: "q\(answered)"), to: peer, expecting: Answer.self, timeout: .seconds(20))
            #expect(answer.text == "q\(answered)")
            slowest = max(slowest, ContinuousClock.now - asked)
            answered += 1
            try await Task.sleep(for: .milliseconds(250))
        }
        try await within(30, "the throttled transfer") { try await transferTask.value }
        let elapsed = ContinuousClock.now - started
        // 20 MiB at 4 MiB/s take 5 s: the link was really throttled.
        #expect(elapsed > .seconds(4), "the transfer took \(elapsed), faster than the link allows")
        #expect(answered >= 3, "only \(answered) requests were answered during the transfer")
        #expect(sender.connectedPeers.count == 1)
        disconnections.cancel()
        #expect(await disconnections.value == false, "the peer was disconnected during the transfer")
        print("throttled link: \(answered) requests answered during the transfer, the slowest in \(slowest)")
    }
}
