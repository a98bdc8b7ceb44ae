import Foundation
import NIOCore
import NIOPosix
import Testing

extension DiscoveryTests {
    /// What Avahi discovery does when avahi-daemon is missing, appears later, or restarts, seen
    /// through `peerkit node` processes.
    ///
    /// libdbus reads `DBUS_SYSTEM_BUS_ADDRESS` once per process, when it first connects, and Avahi
    /// offers no other way to choose the bus; so these tests run PeerKit in child processes whose
    /// environment names a missing bus, or the bus of a private daemon the test starts, stops and
    /// restarts. The shared test process and the shared daemon are never touched. (Swift Testing's
    /// exit tests would be the in-process way, but their child inherits every descriptor of the
    /// parent, NIO's sockets included, and so disturbs the connection tests running at the same time.)
    @Suite("Avahi when the daemon is missing or restarts")
    struct AvahiDaemonFailureTests {
        @Test func anUnreachableDaemonIsReportedAtOnceWithWhatToDo() async throws {
            let type = AvahiTestSupport.randomServiceType()
            let node = try NodeProcess(arguments: [type, "--name", "lonely", "--listen-host", "127.0.0.1"],
                                       environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/peerkit-no-bus"])
            defer { node.terminate() }
            let error = try await node.next("error", within: 10)
            let message = try #require(error["message"] as? String)
            #expect(message.contains("\"\(type)\" cannot be discovered"))
            #expect(message.contains("avahi-daemon cannot be reached through the D-Bus system bus"))
            #expect(message.contains("Start avahi-daemon"))
            #expect(message.contains("static peers"))
            // "t" is seconds since the node started: the error comes at once, not after a timeout.
            let elapsed = try #require(error["t"] as? String)
            let seconds = try #require(Double(elapsed))
            #expect(seconds < 1, "the error took \(seconds) s")
            // The node goes on running (discovery keeps retrying in the background) and quits cleanly.
            node.command("quit")
            _ = try await node.next("stopped")
        }

        @Test func aDaemonThatAppearsLaterOrRestartsIsUsedAgainByItself() async throws {
            let daemon = try PrivateAvahiDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let environment = ["DBUS_SYSTEM_BUS_ADDRESS": daemon.busAddress]
            let arguments = [type, "--listen-host", "127.0.0.1"]
            let survivor = try NodeProcess(arguments: arguments + ["--name", "survivor"], environment: environment)
            defer { survivor.terminate() }
            let port = try #require(try await survivor.next("started")["port"] as? String)
            _ = try await survivor.next("error")  // No bus, no daemon yet.

            // The daemon appears: the node advertises and browses without being told.
            try await daemon.start()
            try await expectAdvertised(["survivor": port], on: daemon, type: type)
            let second = try NodeProcess(arguments: arguments + ["--name", "second"], environment: environment)
            defer { second.terminate() }
            _ = try await survivor.next("peerConnected", ["peer.name": "second"])

            // The daemon dies: discovery reports it, and the TCP connection carries on meanwhile.
            daemon.stopDaemon()
            _ = try await survivor.next("error")
            second.command("broadcast during the outage")
            _ = try await survivor.next("message", ["text": "during the outage"])

            // It comes back: the node registers again and browses again, by itself.
            try await daemon.start()
            try await expectAdvertised(["survivor": port], on: daemon, type: type)
            let witness = try await DialWitness()
            defer { witness.close() }
            let foreign = try daemon.publish("foreign", type: "_\(type)._tcp", port: witness.port)
            defer { foreign.terminate() }
            try await witness.waitForDial()  // Only a browse after the restart can have found it.
        }

        /// Polls `avahi-browse` on `daemon` until every name is advertised with its port.
        private func expectAdvertised(_ ports: [String: String], on daemon: PrivateAvahiDaemon, type: String) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            var lines: [[String]] = []
            while ContinuousClock.now < deadline {
                lines = try await daemon.browseResolved("_\(type)._tcp")
                let advertised = Dictionary(lines.filter { $0.count > 8 }.map { ($0[3], $0[8]) }) { first, _ in first }
                if ports.allSatisfy({ advertised[$0.key] == $0.value }) { return }
            }
            Issue.record("avahi-browse on the private daemon does not show \(ports): \(lines)")
        }
    }
}

/// A TCP listener on loopback that tells when something dials it.
final class DialWitness: Sendable {
    let port: Int
    private let channel: any Channel
    private let dials: AsyncStream<Void>

    init() async throws {
        let (dials, continuation) = AsyncStream.makeStream(of: Void.self)
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                continuation.yield()
                return child.close()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
        self.dials = dials
    }

    /// Waits until the first dial, for at most `timeout`.
    func waitForDial(timeout: Duration = .seconds(20)) async throws {
        let dials = dials
        let dialed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { await dials.first { _ in true } != nil }
            group.addTask {
                try await Task.sleep(for: timeout)
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        if !dialed { Issue.record("Nothing dialed 127.0.0.1:\(port) within \(timeout).") }
    }

    func close() {
        channel.close(promise: nil)
    }
}
