import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import PeerKit

/// What the adversarial peers send as an application message.
struct AdversarialBlob: Codable, Sendable, Equatable {
    var text: String
}

/// A real ``PeerTransceiver`` attacked from raw sockets on 127.0.0.1: peers that never read,
/// frames before the hello, frames that trickle in slower than the peer timeout, and endpoints
/// that are not PeerKit peers at all.
@Suite("A transceiver under attack from raw sockets")
struct TransceiverAdversarialTests {
    @Test("a frame over 64 KiB before the hello closes the connection at its length field; after the hello the full limit applies")
    func handshakeFrameLimit() async throws {
        let serviceType = randomServiceType()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "target")
        // Long enough that closing at once and closing at the timeout cannot be confused on a
        // loaded machine.
        configuration.handshakeTimeout = .seconds(30)
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        defer { transceiver.stop() }
        let inbox = Inbox<Int>()
        transceiver.receive(AdversarialBlob.self) { blob, _ in inbox.put(blob.text.utf8.count) }

        // Before the hello: only the length field of a 1 MiB frame, which is under the 16 MiB
        // frame limit but over the 64 KiB handshake limit. The connection must close without
        // waiting for the body.
        let stranger = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        var header = ByteBuffer()
        header.writeInteger(UInt32(1024 * 1024))
        try await stranger.write(header)
        // The handshake timeout (30 s here) would close it too: it must close well before.
        let sentHeader = ContinuousClock.now
        var refusal: [String] = []
        while let frame = await stranger.nextFrame(skipping: [#"{"type":"peerkit.hello""#, #"{"type":"peerkit.ping""#]) { refusal.append(frame) }
        let closedAfter = ContinuousClock.now - sentHeader
        #expect(closedAfter < .seconds(15), "a 1 MiB length field before the hello closed the connection only after \(closedAfter), not at once")
        #expect(refusal.count == 1 && refusal.first?.contains("peerkit.error") == true, "the refusal of a pre-hello frame over 64 KiB was \(refusal), not one peerkit.error")

        // After the hello, a 1 MiB message is an ordinary message.
        let peer = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        defer { peer.close() }
        try await peer.sayHello(serviceType: serviceType, peerID: "big-sender", name: "big sender")
        let text = String(repeating: "x", count: 1024 * 1024)
        try await peer.send(#"{"type":"AdversarialBlob","payload":{"text":"\#(text)"}}"#)
        #expect(try await inbox.take(1) == [1024 * 1024])
    }

    @Test("a frame that trickles in for longer than the peer timeout keeps the connection alive: any bytes prove life")
    func frameInProgressIsLife() async throws {
        let serviceType = randomServiceType()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "patient")
        // A piece every 200 ms against a 2 s timeout: a margin of 10 for a busy machine.
        configuration.heartbeatInterval = .milliseconds(400)
        configuration.peerTimeout = .seconds(2)
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        defer { transceiver.stop() }
        let inbox = Inbox<Int>()
        transceiver.receive(AdversarialBlob.self) { blob, _ in inbox.put(blob.text.utf8.count) }
        let events = transceiver.events()

        // The raw peer never answers a ping; only the frame's own bytes show it is alive.
        let peer = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        defer { peer.close() }
        try await peer.sayHello(serviceType: serviceType, peerID: "trickler", name: "trickler")
        _ = try await nextEvent(events, "the trickler to connect") { if case .peerConnected = $0 { true } else { false } }
        let frame = ByteBuffer.frame(#"{"type":"AdversarialBlob","payload":{"text":"\#(String(repeating: "y", count: 30 * 4096))"}}"#)
        // 6 s for one frame, three times the peer timeout, a piece every 200 ms.
        var remaining = frame
        while remaining.readableBytes > 0 {
            let piece = remaining.readSlice(length: min(4096, remaining.readableBytes)) ?? ByteBuffer()
            try await peer.write(piece)
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(try await inbox.take(1) == [30 * 4096])
        #expect(transceiver.availablePeers.contains { $0.id == "trickler" }, "the peer was dropped while its frame was still arriving")
    }

    @Test("a peer that never reads is disconnected once its outbox is full, with one logged sentence, and a send or a request to it throws peerTooSlow")
    func neverReadingPeer() async throws {
        let serviceType = randomServiceType()
        let log = CapturedLog()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "sender")
        configuration.maximumQueuedOutboundBytes = 1024 * 1024
        configuration.slowPeerGracePeriod = .seconds(1)
        // Long enough that silence is not what ends it: the peer stays connected, it just never reads.
        configuration.peerTimeout = .seconds(60)
        configuration.logger = log.logger
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        defer { transceiver.stop() }
        let events = transceiver.events()

        let sink = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        defer { sink.close() }
        try await sink.sayHello(serviceType: serviceType, peerID: "never-reads", name: "never reads")
        let peer = try await transceiver.waitForPeer(timeout: .seconds(20)) { $0.id == "never-reads" }
        try await sink.channel.setOption(ChannelOptions.autoRead, value: false).get()

        // 40 MiB: far more than the kernel's socket buffers and the 1 MiB bound together. The
        // broadcast that finds the outbox full (a broadcast cannot wait) disconnects the peer; what
        // was queued for it never goes past the limit plus one frame.
        let blob = AdversarialBlob(text: String(repeating: "z", count: 256 * 1024))
        var mostQueued = 0
        for _ in 0..<160 {
            transceiver.broadcast(blob)
            mostQueued = max(mostQueued, transceiver.session?.manager.connection(to: "never-reads")?.queuedOutboundBytes ?? 0)
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(mostQueued <= 1024 * 1024 + 256 * 1024 + 1024, "queued \(mostQueued) bytes for the peer")

        let event = try await nextEvent(events, within: 30, "the never-reading peer to be disconnected") {
            if case .peerDisconnected(let gone, _) = $0 { gone.id == "never-reads" } else { false }
        }
        guard case .peerDisconnected(_, let reason?) = event, reason.code == .peerTooSlow,
              let queued = reason.queuedBytes, let limit = reason.limit, let grace = reason.grace else {
            Issue.record("the never-reading peer was disconnected with \(event), not peerTooSlow")
            return
        }
        // Either the broadcast found the outbox full (no grace: it cannot wait), or the waiting send
        // ran out of its grace period first.
        #expect(queued >= limit && limit == 1024 * 1024 && (grace == .zero || grace == .seconds(1)), "\(reason)")
        // A send to it now throws why it went.
        do {
            try await transceiver.send(blob, to: [peer])
            Issue.record("a send to the peer disconnected as too slow did not throw")
        } catch let error as PeerKitError {
            if error.code != .peerTooSlow { Issue.record("send to the never-reading peer threw \(error), not peerTooSlow") }
        }
        // So does a request.
        do {
            _ = try await transceiver.request(blob, to: peer, expecting: AdversarialBlob.self)
            Issue.record("a request to the peer disconnected as too slow did not throw")
        } catch let error as PeerKitError {
            if error.code != .peerTooSlow { Issue.record("a request to the never-reading peer threw \(error), not peerTooSlow") }
        }
        _ = await log.waitForMessage(containing: "did not read what was sent to it")
        let sentences = log.messages(containing: "did not read what was sent to it")
        #expect(sentences.count == 1, "the slow peer's disconnection was logged \(sentences.count) times: \(sentences)")
        #expect(sentences.first?.contains("never reads") == true, "\(sentences)")
    }

    /// A TCP listener the test owns that counts the connections it accepts and ends each with
    /// `banner` (nothing, or the greeting of a service that is not PeerKit).
    private final class CountingListener: Sendable {
        let channel: any Channel
        private let accepted = NIOLockedValueBox<[ContinuousClock.Instant]>([])

        init(banner: String?) async throws {
            let accepted = accepted
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .childChannelInitializer { child in
                    accepted.withLockedValue { $0.append(.now) }
                    guard let banner else { return child.close() }
                    // Written once the connection is active: written in the initializer, before
                    // that, the banner never went out and the close after it never came, so this
                    // service said nothing and each dial waited out the 5 s handshake timeout.
                    return child.eventLoop.makeCompletedFuture { try child.pipeline.syncOperations.addHandler(BannerThenClose(banner: banner)) }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
        }

        var endpoint: PeerEndpoint { PeerEndpoint(host: "127.0.0.1", port: channel.localAddress?.port ?? 0) }
        var acceptTimes: [ContinuousClock.Instant] { accepted.withLockedValue { $0 } }
    }

    /// Writes a banner as soon as the connection is active, then closes it, as a service of another
    /// protocol that refuses what it does not understand would.
    private final class BannerThenClose: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let banner: String

        init(banner: String) {
            self.banner = banner
        }

        func channelActive(context: ChannelHandlerContext) {
            context.writeAndFlush(NIOAny(ByteBuffer(string: banner)), promise: nil)
            context.close(promise: nil)
        }
    }

    @Test("a peer that refuses, and a service that is not PeerKit, are redialled with exponential back-off, logged once each, and at once on a new advertisement")
    func redialBackoff() async throws {
        let serviceType = randomServiceType()
        let closing = try await CountingListener(banner: nil)
        let foreign = try await CountingListener(banner: "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
        defer {
            closing.channel.close(promise: nil)
            foreign.channel.close(promise: nil)
        }
        // A port with nothing listening on it refuses every connection.
        let vacant = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let vacantPort = vacant.localAddress?.port ?? 1
        try await vacant.close()

        let log = CapturedLog()
        let discovery = ManualDiscovery()
        var configuration = manualConfiguration(serviceType: serviceType, name: "dialler", discovery: discovery)
        configuration.logger = log.logger
        // A back-off that grows four times per attempt from 0.1 s, so that it is long after a window
        // of 3 s (the default, 0.5 s doubling, takes 10 s for that); `Backoff`'s own tests cover
        // the defaults.
        configuration.reconnectBackoff = Backoff(initial: .milliseconds(100), multiplier: 4)
        let window = Duration.seconds(3)
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        defer { transceiver.stop() }
        func advertise(_ name: String, _ endpoint: PeerEndpoint) {
            discovery.inject(.found(DiscoveredService(key: name, name: name, peerID: "id-" + name, endpoints: [endpoint], txtRecord: ["peerid": "id-" + name, "proto": "1"])))
        }
        let start = ContinuousClock.now
        advertise("closer", closing.endpoint)
        advertise("impostor", foreign.endpoint)
        advertise("refuser", PeerEndpoint(host: "127.0.0.1", port: vacantPort))
        try await Task.sleep(until: start + window)

        // Delays of 0.1, 0.4 and 1.6 s with ±20 % jitter: attempts at about 0, 0.1, 0.5 and 2.1 s
        // (1.7-2.5 s), the next one 6.4 s later. Without back-off, a redial every 0.1 s makes 30.
        for (name, listener) in [("closer", closing), ("impostor", foreign)] {
            let dials = listener.acceptTimes.filter { $0 < start + window }.count
            #expect((2...6).contains(dials), "the \(name) was dialled \(dials) times in 3 s; exponential back-off from 0.1 s allows 2 to 6.")
        }
        let loud = log.messages(atLeast: .notice)
        for name in ["closer", "impostor", "refuser"] {
            let lines = loud.filter { $0.contains(name) }
            #expect((1...2).contains(lines.count), "the unreachable \(name) was logged \(lines.count) times at notice or above in 3 s; a state change is logged, not each attempt: \(lines)")
            // The reason, often an error's own sentence, is not followed by a second period, and a
            // system call's error has no parenthesis too many ("Connection refused (errno: 111)").
            #expect(!lines.contains { $0.contains(".. ") || $0.contains(") (errno") }, "\(lines)")
        }
        // The impostor's banner is named as what it is, not as a frame of 1,397,966,893 bytes.
        #expect(loud.contains { $0.contains("impostor") && $0.contains("does not speak PeerKit: its first bytes were \"SSH-\"") }, "\(loud)")

        // The next attempt is due at 6.8 s at the earliest; a new advertisement redials at once.
        let before = closing.acceptTimes.count
        let readvertised = ContinuousClock.now
        advertise("closer", closing.endpoint)
        try await within(2, "a redial within 2 s of a new advertisement") {
            while closing.acceptTimes.count == before { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(closing.acceptTimes.last.map { $0 - readvertised < .seconds(2) } == true)
    }
}
