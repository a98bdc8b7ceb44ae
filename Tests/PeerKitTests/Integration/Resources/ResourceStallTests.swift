import Clocks
import Crypto
import Foundation
import NIOCore
import Testing
@testable import PeerKit

/// Transfers whose peer stops taking part, against raw peers, on a test clock: cancelled after
/// ``PeerConfiguration/resourceStallTimeout`` with a sentence to both sides, the connection kept.
@Suite("Resources whose peer stalls")
struct ResourceStallTests {
    /// A transceiver on `clock` and a raw peer that lists the resources feature, connected to it.
    private func transceiverAndRawPeer(clock: TestClock<Duration>, configure: (inout PeerConfiguration) -> Void = { _ in }) async throws -> (PeerTransceiver, RawPeer) {
        let serviceType = randomServiceType()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "stalls")
        configuration.clock = clock
        // A raw peer answers no pings; the clock is advanced past the stall timeout, not this.
        configuration.peerTimeout = .seconds(600)
        configuration.resourceStallTimeout = .seconds(30)
        configure(&configuration)
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        let raw = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        try await raw.sayHello(serviceType: serviceType, features: ["resources"])
        let hello = try #require(await raw.nextFrame())
        #expect(hello.contains(#""resources""#), "\(hello)")
        return (transceiver, raw)
    }

    /// Sends 64 bytes as the resource "doc" from `sender` to its raw peer, once connected.
    private func sendSixtyFourBytes(from sender: PeerTransceiver) async throws -> OutgoingResource {
        let peer = try await within(20, "the raw peer to connect") {
            while true {
                if let peer = sender.connectedPeers.first { return peer }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        return try await sender.send(resource: .bytes(Array(repeating: UInt8(7), count: 64)), named: "doc", to: peer)
    }

    /// The next frame of `raw` that starts with `prefix`, or "" when the connection closed first
    /// or none came within 20 s (the raw peer is then closed, so the test fails instead of hanging).
    private func frame(from raw: RawPeer, startingWith prefix: String) async -> String {
        let channel = raw.channel
        let deadline = Task {
            try await Task.sleep(for: .seconds(20))
            channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        while let frame = await raw.nextFrame() {
            if frame.hasPrefix(prefix) { return frame }
        }
        return ""
    }

    @Test("a sender that offers a resource and then sends nothing loses it after the stall timeout, with a sentence; its slot is free again and the connection stays")
    func silentSender() async throws {
        let clock = TestClock()
        let (receiver, raw) = try await transceiverAndRawPeer(clock: clock) { $0.maximumConcurrentIncomingResources = 1 }
        defer { receiver.stop(); raw.close() }
        let outcome = Inbox<String>()
        let read = Inbox<Int>()
        receiver.receiveResources(named: "doc") { resource in
            do {
                for try await chunk in resource.chunks { read.put(chunk.readableBytes) }
                outcome.put("completed")
            } catch {
                outcome.put("\(error)")
            }
        }
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"doc","size":100}}"#)
        #expect(await frame(from: raw, startingWith: #"{"type":"peerkit.resource.accept""#).contains(#""transfer":1"#))
        // Some bytes, then nothing: the stall counts from the last of them.
        try await raw.write(ResourceChunkFrame.encode(transfer: 1, data: ByteBuffer(bytes: [1, 2, 3])))
        // Read by the handler: everything before the clock moves happened at its time zero.
        #expect(try await read.take(1) == [3])
        // The only slot is taken: a second offer is refused.
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":2,"name":"doc"}}"#)
        let busy = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.refuse""#)
        #expect(busy.contains("already receiving 1 resources"), "\(busy)")

        await clock.advance(by: .seconds(31))
        let cancelled = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.refuse""#)
        #expect(cancelled.contains(#""transfer":1"#) && cancelled.contains("this peer cancelled it: nothing arrived for 30.0 seconds (PeerConfiguration.resourceStallTimeout)"), "\(cancelled)")
        let said = try await outcome.take(1)[0]
        #expect(said.contains("nothing arrived for 30.0 seconds"), "\(said)")

        // The slot is free again, on the same connection.
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":3,"name":"doc"}}"#)
        let accepted = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.accept""#)
        #expect(accepted.contains(#""transfer":3"#), "\(accepted)")
        #expect(receiver.connectedPeers.count == 1)
    }

    @Test("a sender whose own handler is slow is not cancelled: waiting on this side does not count")
    func slowHandlerIsNotAStall() async throws {
        let clock = TestClock()
        let (receiver, raw) = try await transceiverAndRawPeer(clock: clock) { $0.resourceWindowBytes = 8 }
        defer { receiver.stop(); raw.close() }
        let release = Inbox<Void>()
        let outcome = Inbox<String>()
        receiver.receiveResources(named: "doc") { resource in
            do {
                _ = try await release.take(1, within: 60)
                var bytes = 0
                for try await chunk in resource.chunks { bytes += chunk.readableBytes }
                outcome.put("read \(bytes) bytes")
            } catch {
                outcome.put("\(error)")
            }
        }
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"doc","size":8}}"#)
        #expect(await frame(from: raw, startingWith: #"{"type":"peerkit.resource.accept""#).contains(#""window":8"#))
        // The whole window is sent: the sender can do nothing more until the handler reads.
        try await raw.write(ResourceChunkFrame.encode(transfer: 1, data: ByteBuffer(bytes: Array(repeating: 9, count: 8))))
        try await within(20, "the chunk to arrive") {
            while (receiver.session?.resources.receivedBytes(incoming: 1) ?? 0) < 8 { try await Task.sleep(for: .milliseconds(5)) }
        }
        await clock.advance(by: .seconds(90))
        // Still open: the end is accepted and the handler reads everything once released.
        let digest = ResourceDigest.hex(SHA256.hash(data: Array(repeating: UInt8(9), count: 8)))
        try await raw.send(#"{"type":"peerkit.resource.end","payload":{"transfer":1,"size":8,"sha256":"\#(digest)"}}"#)
        release.put(())
        #expect(try await outcome.take(1) == ["read 8 bytes"])
        #expect(await frame(from: raw, startingWith: #"{"type":"peerkit.resource.done""#).contains(#""transfer":1"#))
    }

    @Test("a receiver whose handler works on after taking every byte is waited for: the send completes with its done")
    func slowReceiverHandlerIsNotAStall() async throws {
        let clock = TestClock()
        let (sender, raw) = try await transceiverAndRawPeer(clock: clock)
        defer { sender.stop(); raw.close() }
        let transfer = try await sendSixtyFourBytes(from: sender)
        _ = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.offer""#)
        try await raw.send(#"{"type":"peerkit.resource.accept","payload":{"transfer":1,"window":1048576,"chunk":65536}}"#)
        let end = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.end""#)
        #expect(end.contains(#""size":64"#), "\(end)")
        // Every byte taken (what PeerKit's receiver says once the digest checked out), then a
        // handler that works for 90 s before `done`.
        try await raw.send(#"{"type":"peerkit.resource.ack","payload":{"transfer":1,"received":64}}"#)
        try await within(20, "the acknowledgement to arrive") {
            for await step in transfer.progress where step.bytesDone == 64 { break }
        }
        await clock.advance(by: .seconds(90))
        try await raw.send(#"{"type":"peerkit.resource.done","payload":{"transfer":1}}"#)
        try await within(20, "the transfer to finish") { try await transfer.finished() }
    }

    @Test("a receiver that accepts and then takes nothing fails the send after the stall timeout, and is told why")
    func silentReceiver() async throws {
        let clock = TestClock()
        let (sender, raw) = try await transceiverAndRawPeer(clock: clock)
        defer { sender.stop(); raw.close() }
        let transfer = try await sendSixtyFourBytes(from: sender)
        let offer = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.offer""#)
        #expect(offer.contains(#""name":"doc""#), "\(offer)")
        // A window of 16 bytes, and never an acknowledgement.
        try await raw.send(#"{"type":"peerkit.resource.accept","payload":{"transfer":1,"window":16,"chunk":16}}"#)
        // The first 16 bytes arrive (a binary chunk frame), and then the sender waits for room.
        var chunk: String?
        while let frame = await raw.nextFrame() {
            if !frame.hasPrefix("{") {
                chunk = frame
                break
            }
        }
        #expect(chunk != nil, "the connection closed before a chunk arrived")
        try await within(20, "the sender to wait for room in the window") {
            while sender.session?.resources.stallStatus(outgoing: 1)?.waitsOnPeer != true { try await Task.sleep(for: .milliseconds(5)) }
        }
        await clock.advance(by: .seconds(31))
        let cancel = await frame(from: raw, startingWith: #"{"type":"peerkit.resource.cancel""#)
        #expect(cancel.contains("the receiver took nothing for 30.0 seconds (PeerConfiguration.resourceStallTimeout)"), "\(cancel)")
        do {
            try await transfer.finished()
            Issue.record("a transfer whose receiver took nothing finished")
        } catch let error as PeerKitError {
            #expect(error.code == .resourceCancelled && error.description.contains("the receiver took nothing for 30.0 seconds"), "\(error)")
        }
        #expect(sender.connectedPeers.count == 1)
    }
}
