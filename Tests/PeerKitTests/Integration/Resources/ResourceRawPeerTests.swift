import Crypto
import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import PeerKit

/// Resources against peers scripted over a raw socket: corrupted data, a disconnect midway, a
/// sender that ignores its window, and a version-1 peer without `features`.
@Suite("Resources against raw peers")
struct ResourceRawPeerTests {
    /// A transceiver with a resource handler, and a raw peer connected to it that listed `features`.
    func receiverAndRawPeer(features: [String]?, configure: (inout PeerConfiguration) -> Void = { _ in }) async throws -> (PeerTransceiver, RawPeer) {
        let serviceType = randomServiceType()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "receiver")
        // A raw peer answers no pings: a loaded machine must not lose it to the heartbeat mid-test.
        configuration.peerTimeout = .seconds(60)
        // Nor to the handshake timeout: with every suite running at once on 2 cores, the test's
        // task once waited more than the default 5 s between connecting and sending its hello.
        configuration.handshakeTimeout = .seconds(60)
        configure(&configuration)
        let receiver = PeerTransceiver(configuration: configuration)
        try await receiver.start()
        let raw = try await RawPeer(connectingTo: try endpoint(of: receiver))
        try await raw.sayHello(serviceType: serviceType, features: features)
        let hello = try #require(await raw.nextFrame())
        #expect(hello.contains(#""resources""#), "\(hello)")
        return (receiver, raw)
    }

    func chunk(_ transfer: UInt32, _ bytes: [UInt8]) -> ByteBuffer {
        ResourceChunkFrame.encode(transfer: transfer, data: ByteBuffer(bytes: bytes))
    }

    @Test("a resource whose digest does not match is refused, the handler's write throws, and no file appears")
    func corruption() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (receiver, raw) = try await receiverAndRawPeer(features: ["resources"])
        defer { receiver.stop(); raw.close() }
        let outcome = Inbox<String>()
        receiver.receiveResources(named: "doc") { resource in
            do {
                try await resource.write(to: scratch.file("doc"))
                outcome.put("completed")
            } catch {
                outcome.put("\(error)")
            }
        }
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":9,"name":"doc","size":6}}"#)
        let accept = try #require(await raw.nextFrame())
        #expect(accept.hasPrefix(#"{"type":"peerkit.resource.accept","payload":{"transfer":9,"window":4194304,"chunk":262144}"#), "\(accept)")
        try await raw.write(chunk(9, Array("abc".utf8)))
        try await raw.write(chunk(9, Array("def".utf8)))
        // The digest of "abcdeX", not of the bytes sent.
        let wrong = ResourceDigest.hex(SHA256.hash(data: Array("abcdeX".utf8)))
        try await raw.send(#"{"type":"peerkit.resource.end","payload":{"transfer":9,"size":6,"sha256":"\#(wrong)"}}"#)
        var refusal = ""
        while let frame = await raw.nextFrame() {
            if frame.hasPrefix(#"{"type":"peerkit.resource.refuse""#) { refusal = frame; break }
        }
        #expect(refusal.contains("its SHA-256 digest or size does not match what arrived (6 bytes)"), "\(refusal)")
        let said = try await outcome.take(1)[0]
        #expect(said.contains("arrived corrupted: its SHA-256 digest differs"), "\(said)")
        #expect(try scratch.contents() == [])
    }

    @Test("the right digest completes the resource and is confirmed with done")
    func intactFromRawPeer() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (receiver, raw) = try await receiverAndRawPeer(features: ["resources"])
        defer { receiver.stop(); raw.close() }
        receiver.receiveResources(named: "doc") { resource in try await resource.write(to: scratch.file("doc")) }
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":3,"name":"doc"}}"#)
        _ = await raw.nextFrame()
        try await raw.write(chunk(3, Array("hello".utf8)))
        let digest = ResourceDigest.hex(SHA256.hash(data: Array("hello".utf8)))
        try await raw.send(#"{"type":"peerkit.resource.end","payload":{"transfer":3,"size":5,"sha256":"\#(digest)"}}"#)
        var done = ""
        var acknowledgements: [String] = []
        while let frame = await raw.nextFrame() {
            if frame.hasPrefix(#"{"type":"peerkit.resource.ack""#) { acknowledgements.append(frame) }
            if frame.hasPrefix(#"{"type":"peerkit.resource.done""#) { done = frame; break }
        }
        // Every byte is acknowledged once the digest checked out, before `done`.
        #expect(acknowledgements.last == #"{"type":"peerkit.resource.ack","payload":{"transfer":3,"received":5}}"#, "\(acknowledgements)")
        #expect(done == #"{"type":"peerkit.resource.done","payload":{"transfer":3}}"#)
        #expect(try String(contentsOf: scratch.file("doc"), encoding: .utf8) == "hello")
    }

    @Test("a sender that disconnects midway leaves no file, and the handler learns the connection closed")
    func disconnectMidway() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (receiver, raw) = try await receiverAndRawPeer(features: ["resources"])
        defer { receiver.stop() }
        let outcome = Inbox<String>()
        let got = Inbox<Void>()
        receiver.receiveResources(named: "doc") { resource in
            let watcher = Task { for await step in resource.progress where step.bytesDone > 0 { got.put(()); break } }
            defer { watcher.cancel() }
            do {
                try await resource.write(to: scratch.file("doc"))
                outcome.put("completed")
            } catch let error as PeerKitError where error.code == .connectionClosed || error.code == .connectionFailed {
                // A clean close, or a reset (the raw peer closed with bytes unread).
                outcome.put("the connection ended")
            } catch {
                outcome.put("\(error)")
            }
        }
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"doc","size":1000000}}"#)
        _ = await raw.nextFrame()
        try await raw.write(chunk(1, Array(repeating: 7, count: 100_000)))
        _ = try await got.take(1)
        raw.close()
        let said = try await outcome.take(1)[0]
        #expect(said == "the connection ended", "\(said)")
        #expect(try scratch.contents() == [])
    }

    @Test("a sender that goes beyond the window it was granted is disconnected with a sentence")
    func windowViolation() async throws {
        let (receiver, raw) = try await receiverAndRawPeer(features: ["resources"]) { $0.resourceWindowBytes = 64 * 1024 }
        defer { receiver.stop(); raw.close() }
        let hold = Inbox<Void>()
        receiver.receiveResources(named: "doc") { resource in
            _ = try? await hold.take(1, within: 60)
        }
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"doc"}}"#)
        let accept = try #require(await raw.nextFrame())
        #expect(accept.contains(#""window":65536"#), "\(accept)")
        for _ in 0..<3 { try await raw.write(chunk(1, Array(repeating: 1, count: 32 * 1024))) }
        var error = ""
        while let frame = await raw.nextFrame() {
            if frame.hasPrefix(#"{"type":"peerkit.error""#) { error = frame; break }
        }
        #expect(error.contains("sent 98304 bytes ahead of what was acknowledged, over the 65536-byte window it was granted"), "\(error)")
        #expect(await raw.nextFrame() == nil)
        hold.put(())
    }

    @Test("5,000 one-byte chunk frames held in the window cost a few buffers, not one each, and still read back intact")
    func tinyChunks() async throws {
        // Its own event loop: thousands of tiny frames keep a debug build's loop busy for a while,
        // and the other tests' heartbeats must not wait behind them.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (receiver, raw) = try await receiverAndRawPeer(features: ["resources"]) { $0.eventLoopGroup = group }
        defer { raw.close() }
        try await withOwnLoops([group], running: [receiver]) {
            let arrived = Inbox<IncomingResource>()
            let read = Inbox<[UInt8]>()
            let hold = Inbox<Void>()
            receiver.receiveResources(named: "doc") { resource in
                arrived.put(resource)
                _ = try? await hold.take(1, within: 60)
                var bytes: [UInt8] = []
                for try await chunk in resource.chunks { bytes += Array(chunk.readableBytesView) }
                read.put(bytes)
            }
            try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":5,"name":"doc","size":5000}}"#)
            _ = await raw.nextFrame()
            let bytes = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            var frames = ByteBuffer()
            for byte in bytes { frames.writeImmutableBuffer(chunk(5, [byte])) }
            try await raw.write(frames)
            let resource = try await arrived.take(1)[0]
            try await within(20, "every byte to arrive") {
                while resource.receivedBytes < 5_000 { try await Task.sleep(for: .milliseconds(10)) }
            }
            // At most one buffer per 2 KiB (see IncomingResource.smallPiece), however the reads fell.
            #expect(resource.bufferedPieceCount <= 5_000 / 2048 + 2, "\(resource.bufferedPieceCount) buffers hold 5,000 bytes")
            hold.put(())
            let digest = ResourceDigest.hex(SHA256.hash(data: bytes))
            try await raw.send(#"{"type":"peerkit.resource.end","payload":{"transfer":5,"size":5000,"sha256":"\#(digest)"}}"#)
            #expect(try await read.take(1)[0] == bytes)
        }
    }

    @Test("a version-1 peer without features: resources are not sent to it, its resource frames are ignored, and it is still answered")
    func oldPeer() async throws {
        let (receiver, raw) = try await receiverAndRawPeer(features: nil)
        defer { receiver.stop(); raw.close() }
        receiver.respond(to: Question.self) { question, _ in Answer(text: question.text, from: "receiver") }
        let peer = try await within(20, "the old peer to connect") {
            while true {
                if let peer = receiver.connectedPeers.first { return peer }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        do {
            _ = try await receiver.send(resource: .bytes([1, 2, 3]), named: "doc", to: peer)
            Issue.record("a resource was sent to a peer without the feature")
        } catch let error as PeerKitError {
            #expect(error == .featureNotSupported(feature: "resources", peer: error.featurePeer ?? ""))
            #expect(error.description.contains("does not take part in the \"resources\" protocol feature"), "\(error)")
        }
        // An old peer that happens to send such a frame: ignored, like any unknown control frame.
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"doc"}}"#)
        try await raw.send(#"{"type":"Question","id":"1","payload":{"text":"still there?"}}"#)
        let reply = try #require(await raw.nextFrame())
        #expect(reply == #"{"type":"Answer","replyTo":"1","payload":{"text":"still there?","from":"receiver"}}"#, "\(reply)")
    }
}

extension PeerKitError {
    /// The peer named by ``PeerKitError/featureNotSupported(feature:peer:)``.
    var featurePeer: String? {
        code == .featureNotSupported ? peer : nil
    }
}
