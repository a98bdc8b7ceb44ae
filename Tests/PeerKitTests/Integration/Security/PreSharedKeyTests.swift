import Clocks
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import PeerKit

@Suite("Pre-shared-key TLS between transceivers")
struct PreSharedKeyTests {
    @Test("two transceivers with the same key connect over TLS and exchange messages")
    func sameKey() async throws {
        let serviceType = randomServiceType()
        let key = PeerKey.random()
        let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(key)))
        try await server.start()
        defer { server.stop() }
        let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: .preSharedKey(key), peers: [try endpoint(of: server)]))
        let inbox = Inbox<String>()
        server.receive(Note.self) { note in inbox.put(note.text) }
        try await client.start()
        defer { client.stop() }
        let peer = try await client.waitForPeer(timeout: .seconds(20))
        try await client.send(Note(text: "secret"), to: [peer])
        #expect(try await inbox.take(1) == ["secret"])
        let connection = try #require(server.session?.manager.activeConnections().first)
        // TLS sits in the pipeline (the translator is installed only with a key).
        let installed = try await connection.channel.eventLoop.submit {
            (try? connection.channel.pipeline.syncOperations.handler(type: TLSErrorTranslator.self)) != nil
        }.get()
        #expect(installed)
    }

    @Test("a peer with another key is refused before any frame is dispatched; both sides say the keys differ, and the dialler does not retry")
    func wrongKey() async throws {
        let serviceType = randomServiceType()
        let serverKey = PeerKey.random()
        let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(serverKey)))
        let serverLog = EventLog(server)
        let delivered = Inbox<String>()
        server.receive(Note.self) { note in delivered.put(note.text) }
        try await server.start()
        defer { server.stop() }
        let clientKey = PeerKey.random()
        // The client's timers (its back-off among them) run on a test clock, moved by hand below.
        let clientClock = TestClock()
        var clientConfiguration = secureConfiguration(serviceType: serviceType, name: "client", security: .preSharedKey(clientKey), peers: [try endpoint(of: server)])
        clientConfiguration.clock = clientClock
        let client = PeerTransceiver(configuration: clientConfiguration)
        let clientEvents = client.events()
        try await client.start()
        defer { client.stop() }
        let error = try await nextError(clientEvents, "the client's key mismatch") { $0.isSecurityRefusal }
        #expect(error.description.contains("The \(serviceType) peer at 127.0.0.1:\(try endpoint(of: server).port) does not share our pre-shared key"), "\(error)")
        #expect(error.description.contains(clientKey.keyID))
        #expect(!error.description.contains(clientKey.hexEncodedSecret))
        try await serverLog.waitForError("the server's refusal") { $0.description.contains("does not share our pre-shared key") }
        // No retry storm: with the client's clock moved past every back-off delay, no timer of it
        // is left (a redial would be one, and would arm a connect timeout).
        #expect(try await timeUntilNextTimerAfterAdvancing(client, clock: clientClock) == nil, "the client redials the peer that refused it")
        #expect(serverLog.errors.filter(\.isSecurityRefusal).count == 1, "\(serverLog.errors)")
        #expect(serverLog.connected.isEmpty)
        #expect(client.connectedPeers.isEmpty)
    }

    @Test("a peer that closes the connection during the TLS handshake without an alert (busy, or going away) is dialled again with back-off, and said once")
    func handshakeCutOffIsRedialled() async throws {
        // What a daemon does when its pending handshakes are at their limit (HandshakeSlots): it
        // accepts, then closes at once; no key was compared.
        let accepted = NIOLockedValueBox(0)
        let closer = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                accepted.withLockedValue { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(CloseOnActive()) }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        defer { closer.close(promise: nil) }
        let port = try #require(closer.localAddress?.port)
        var configuration = secureConfiguration(serviceType: randomServiceType(), name: "client", security: .preSharedKey(PeerKey.random()),
                                                peers: [PeerEndpoint(host: "127.0.0.1", port: port)])
        configuration.reconnectBackoff = Backoff(initial: .milliseconds(100), maximum: .milliseconds(200), jitter: 0)
        let client = PeerTransceiver(configuration: configuration)
        let log = EventLog(client)
        try await client.start()
        defer { client.stop() }

        // Before, the first cut-off was taken for a refusal of our key: never dialled again until
        // the peer was discovered anew, so a busy daemon stayed unreachable while advertised.
        try await within(20, "two redials") {
            while accepted.withLockedValue({ $0 }) < 3 { try await Task.sleep(for: .milliseconds(10)) }
        }
        let cutOff = log.errors.filter { $0.code == .securityHandshakeFailed }
        #expect(cutOff.count == 1, "published once for the episode, not once per redial: \(log.errors)")
        #expect(cutOff.first?.description.contains("without a TLS alert, so no key was compared") == true, "\(cutOff)")
    }

    @Test("a plaintext client meeting a pre-shared-key server is refused, and both sides say one of them speaks plaintext")
    func plaintextClient() async throws {
        let serviceType = randomServiceType()
        let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(.random())))
        let serverEvents = server.events()
        try await server.start()
        defer { server.stop() }
        let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: .none, peers: [try endpoint(of: server)]))
        let clientEvents = client.events()
        try await client.start()
        defer { client.stop() }
        let serverError = try await nextError(serverEvents, "the server's refusal") { $0.isSecurityRefusal }
        #expect(serverError.description.contains("speaks plaintext, and this transceiver requires TLS"), "\(serverError)")
        let clientError = try await nextError(clientEvents, "the client's refusal") { $0.isSecurityRefusal }
        #expect(clientError.description.contains("this peer requires TLS"), "\(clientError)")
        #expect(server.connectedPeers.isEmpty && client.connectedPeers.isEmpty)
    }

    @Test("a pre-shared-key client meeting a plaintext server is refused, and both sides say one of them speaks plaintext")
    func plaintextServer() async throws {
        let serviceType = randomServiceType()
        let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: .none))
        let serverEvents = server.events()
        let delivered = Inbox<String>()
        server.receive(Note.self) { note in delivered.put(note.text) }
        try await server.start()
        defer { server.stop() }
        let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: .preSharedKey(.random()), peers: [try endpoint(of: server)]))
        let clientEvents = client.events()
        try await client.start()
        defer { client.stop() }
        let clientError = try await nextError(clientEvents, "the client's refusal") { $0.isSecurityRefusal }
        #expect(clientError.description.contains("speaks plaintext, and this transceiver requires TLS"), "\(clientError)")
        let serverError = try await nextError(serverEvents, "the server's refusal") { $0.isSecurityRefusal }
        #expect(serverError.description.contains("speaks TLS, and this transceiver has security .none"), "\(serverError)")
        #expect(server.connectedPeers.isEmpty && client.connectedPeers.isEmpty)
    }

    @Test("the bytes of a recorded TLS session, replayed, are refused before any frame is dispatched")
    func replay() async throws {
        let serviceType = randomServiceType()
        let key = PeerKey.random()
        let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(key)))
        let delivered = Inbox<String>()
        server.receive(Note.self) { note in delivered.put(note.text) }
        try await server.start()
        defer { server.stop() }
        let proxy = try await RecordingProxy(target: try endpoint(of: server))
        defer { proxy.close() }
        let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: .preSharedKey(key), peers: [PeerEndpoint(host: "127.0.0.1", port: proxy.port)]))
        try await client.start()
        let peer = try await client.waitForPeer(timeout: .seconds(20))
        try await client.send(Note(text: "once"), to: [peer])
        #expect(try await delivered.take(1) == ["once"])
        client.stop()
        let recorded = proxy.clientBytes
        #expect(recorded.count > 100)

        let serverLog = EventLog(server)
        let raw = try await RawBytesPeer(connectingTo: try endpoint(of: server))
        try await raw.write(recorded)
        try await raw.waitUntilClosed(within: 20)
        try await serverLog.waitForError("the server's refusal of the replay", where: \.isSecurityRefusal)
        #expect(serverLog.connected.isEmpty, "\(serverLog.all)")
    }

    @Test("openssl s_client completes a standard TLS 1.2 ECDHE-PSK-CHACHA20-POLY1305 handshake with a PSK transceiver")
    func opensslClient() async throws {
        let serviceType = randomServiceType()
        let key = PeerKey.random()
        let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(key)))
        try await server.start()
        defer { server.stop() }
        let port = try endpoint(of: server).port
        let result = try await runTool([
            "openssl", "s_client", "-connect", "127.0.0.1:\(port)",
            "-psk", key.hexEncodedSecret, "-psk_identity", PSKIdentity.identity(for: key),
            "-tls1_2", "-cipher", "ECDHE-PSK-CHACHA20-POLY1305",
        ])
        #expect(result.output.contains("Cipher is ECDHE-PSK-CHACHA20-POLY1305"), "\(result.output)")
        #expect(result.output.contains("Protocol  : TLSv1.2") || result.output.contains("TLSv1.2, Cipher is"), "\(result.output)")

        // The same with another key fails the handshake.
        let wrong = try await runTool([
            "openssl", "s_client", "-connect", "127.0.0.1:\(port)",
            "-psk", PeerKey.random().hexEncodedSecret, "-psk_identity", PSKIdentity.identity(for: key),
            "-tls1_2", "-cipher", "ECDHE-PSK-CHACHA20-POLY1305",
        ])
        #expect(wrong.output.contains("bad record mac"), "\(wrong.output)")
        #expect(!result.output.contains("alert"), "\(result.output)")
    }
}

/// A TCP client that writes raw bytes and waits for the other side to close.
final class RawBytesPeer {
    let channel: any Channel

    init(connectingTo endpoint: PeerEndpoint) async throws {
        channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: endpoint.host, port: endpoint.port)
            .get()
    }

    func write(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    func waitUntilClosed(within seconds: Double) async throws {
        let channel = channel
        try await within(seconds, "the connection to close") { try await channel.closeFuture.get() }
    }
}

/// Closes a connection as soon as it is active: a listener whose handshake slots are full.
private final class CloseOnActive: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}
