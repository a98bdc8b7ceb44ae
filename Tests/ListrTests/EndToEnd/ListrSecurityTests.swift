import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// listrd and listrctl are secure by default: a shared key file, refusals that say why with exit
/// status 77 at once, and nothing readable on the wire.
@Suite("listrd and listrctl security")
struct ListrSecurityTests {
    @Test("listrd makes a private key file on first run, listrctl uses it, and a listrctl with another key is refused at once with exit status 77")
    func defaultKeyAndWrongKey() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon()
        let keyPath = world.path("key")
        var status = stat()
        #expect(stat(keyPath, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600)
        #expect(daemon.stderr.contains("Created a new key in \(keyPath)"), "\(daemon.stderr)")
        let address = "127.0.0.1:\(port)"
        let added = try await world.ctl("item", "add", "Milk", "--connect", address)
        #expect(added.exit == .status(0), "\(added)")

        let otherKey = world.path("other-key")
        let started = ContinuousClock.now
        let wrong = try await world.ctl("item", "remove", "1", "--connect", address, "--key-file", otherKey)
        #expect(wrong.exit == .status(77), "\(wrong)")
        #expect(wrong.stderr.contains("does not share our pre-shared key"), "\(wrong)")
        #expect(wrong.stderr.contains("nothing was sent"), "\(wrong)")
        #expect(ContinuousClock.now - started < .seconds(15), "refused at once, not after the 20 s timeout")
        let list = try await world.ctl("item", "list", "--connect", address)
        #expect(list.stdout == "[ ] Milk\n", "\(list)")
    }

    @Test("a key file that group or others can read is refused with a sentence, by listrd and by listrctl")
    func openKeyFile() async throws {
        let world = try ListrFixture()
        let keyPath = world.path("key")
        try Data((String(repeating: "ab", count: 32) + "\n").utf8).write(to: URL(fileURLWithPath: keyPath))
        chmod(keyPath, 0o644)
        let daemon = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", world.path("store.json"), "--listen-host", "127.0.0.1"],
            name: "listrd", environment: world.keyEnvironment
        )
        let result = try await daemon.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(78), "\(result)")
        #expect(result.stderr.contains("The key file \(keyPath) has mode 644, so other users can read the key"), "\(result)")
        let ctl = try await world.ctl("item", "list", "--connect", "127.0.0.1:1")
        #expect(ctl.exit == .status(78), "\(ctl)")
        #expect(ctl.stderr.contains("has mode 644"), "\(ctl)")
    }

    @Test("an --insecure listrd is refused by a default listrctl at once (77), and served to listrctl --insecure")
    func insecureDaemon() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        #expect(daemon.stderr.contains("--insecure"), "\(daemon.stderr)")
        let address = "127.0.0.1:\(port)"
        let refused = try await world.ctl("item", "add", "Milk", "--connect", address)
        #expect(refused.exit == .status(77), "\(refused)")
        #expect(refused.stderr.contains("speaks plaintext, and this transceiver requires TLS"), "\(refused)")
        let insecure = try await world.ctl("item", "add", "Milk", "--connect", address, "--insecure")
        #expect(insecure.exit == .status(0), "\(insecure)")
        let list = try await world.ctl("item", "list", "--connect", address, "--insecure")
        #expect(list.stdout == "[ ] Milk\n", "\(list)")
    }

    @Test("listrctl --insecure against a secure listrd is refused at once with exit status 77")
    func insecureClient() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let result = try await world.ctl("item", "list", "--connect", "127.0.0.1:\(port)", "--insecure")
        #expect(result.exit == .status(77), "\(result)")
        #expect(result.stderr.contains("requires TLS"), "\(result)")
    }

    @Test("the bytes on the wire during a secure item add contain none of the item's text (and do without a key)")
    func capture() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let secret = "Unicorn milk from the secret dairy"
        let proxy = try await ByteRecorder(target: port)
        defer { proxy.close() }
        let added = try await world.ctl("item", "add", secret, "--connect", "127.0.0.1:\(proxy.port)")
        #expect(added.exit == .status(0), "\(added)")
        let bytes = proxy.bytes
        #expect(bytes.count > 200, "the proxy saw the session")
        #expect(!contains(bytes, "Unicorn"))
        #expect(!contains(bytes, "secret dairy"))

        // The same capture of a plaintext session does show the text, so the capture works.
        let (_, plainPort) = try await world.startDaemon(name: "Plain", store: world.path("plain.json"), extra: ["--insecure"])
        let plainProxy = try await ByteRecorder(target: plainPort)
        defer { plainProxy.close() }
        let plain = try await world.ctl("item", "add", secret, "--connect", "127.0.0.1:\(plainProxy.port)", "--insecure")
        #expect(plain.exit == .status(0), "\(plain)")
        #expect(contains(plainProxy.bytes, "Unicorn"))
    }

    @Test("a fake advertisement with sec=none next to the real listrd is never sent a command; listrctl -v says it skipped it")
    func fakeAdvertisement() async throws {
        try await ListrFixture.requireAvahi()
        let world = try ListrFixture()
        let (_, _) = try await world.startDaemon(name: "Real")
        let fake = try await ConnectionCounter()
        defer { fake.close() }
        let publisher = try TestProcess.launch(
            URL(fileURLWithPath: "/usr/bin/avahi-publish"),
            ["-s", "Fake", "_\(world.serviceType)._tcp", String(fake.port), "sec=none", "peerid=fake-peer", "proto=1"],
            name: "avahi-publish Fake"
        )
        defer { publisher.send(SIGKILL) }
        try await publisher.waitFor("the fake advertisement", timeout: ListrFixture.deadline) { stdout, stderr in
            (stdout + stderr).contains("Established")
        }
        let result = try await world.ctl("item", "add", "Milk", "-v")
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "Added \"Milk\" as item 1.\n", "\(result)")
        #expect(result.stderr.contains("skipped a listrd"), "\(result)")
        #expect(result.stderr.contains("advertises security none"), "\(result)")
        #expect(fake.accepted == 0)
    }

    private func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { bytes[$0..<$0 + needle.count].elementsEqual(needle) }
    }
}

/// A TCP proxy on 127.0.0.1 to a local port that records every byte it forwards, both ways.
final class ByteRecorder: Sendable {
    private let channel: any Channel
    private let recorded = NIOLockedValueBox([UInt8]())

    var port: Int { channel.localAddress?.port ?? 0 }
    var bytes: [UInt8] { recorded.withLockedValue { $0 } }

    private final class Relay: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        private let peer = NIOLockedValueBox<(channel: (any Channel)?, pending: [ByteBuffer], closed: Bool)>((nil, [], false))
        let recorded: NIOLockedValueBox<[UInt8]>
        init(_ recorded: NIOLockedValueBox<[UInt8]>) { self.recorded = recorded }

        func connect(to channel: any Channel) {
            let (pending, closed) = peer.withLockedValue { state in
                state.channel = channel
                defer { state.pending = [] }
                return (state.pending, state.closed)
            }
            for buffer in pending { channel.write(buffer, promise: nil) }
            channel.flush()
            if closed { channel.close(promise: nil) }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            recorded.withLockedValue { $0 += buffer.readableBytesView }
            let target = peer.withLockedValue { state -> (any Channel)? in
                if state.channel == nil { state.pending.append(buffer) }
                return state.channel
            }
            target?.writeAndFlush(buffer, promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer.withLockedValue { state -> (any Channel)? in
                state.closed = true
                return state.channel
            }?.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    init(target: Int) async throws {
        let recorded = self.recorded
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { inbound in
                let toServer = Relay(recorded), toClient = Relay(recorded)
                toClient.connect(to: inbound)
                ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.eventLoop.makeCompletedFuture { try outbound.pipeline.syncOperations.addHandler(toClient) }
                    }
                    .connect(host: "127.0.0.1", port: target)
                    .whenComplete { result in
                        switch result {
                        case let .success(outbound): toServer.connect(to: outbound)
                        case .failure: inbound.close(promise: nil)
                        }
                    }
                return inbound.eventLoop.makeCompletedFuture { try inbound.pipeline.syncOperations.addHandler(toServer) }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func close() { channel.close(promise: nil) }
}

/// A listener on 127.0.0.1 that counts the connections it accepts and closes them.
final class ConnectionCounter: Sendable {
    private let channel: any Channel
    private let count = NIOLockedValueBox(0)

    var port: Int { channel.localAddress?.port ?? 0 }
    var accepted: Int { count.withLockedValue { $0 } }

    init() async throws {
        let count = self.count
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                count.withLockedValue { $0 += 1 }
                return child.close()
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func close() { channel.close(promise: nil) }
}
