import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import PeerKit

/// Bytes that differ from chunk to chunk, made on the fly (no memory or disk for large sizes).
struct PatternBytes: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    var total: Int64
    var chunk = 1 << 20
    /// Waits this long before each chunk (to make a transfer last).
    var pause: Duration = .zero

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: Int64
        let chunk: Int
        let pause: Duration
        var counter: UInt8 = 0
        mutating func next() async throws -> ByteBuffer? {
            guard remaining > 0 else { return nil }
            if pause > .zero { try await Task.sleep(for: pause) }
            let length = Int(Swift.min(Int64(chunk), remaining))
            remaining -= Int64(length)
            counter &+= 1
            var buffer = ByteBuffer(repeating: counter, count: length)
            buffer.setInteger(UInt64(remaining), at: 0)
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: total, chunk: chunk, pause: pause) }
}

/// A directory of its own for one test, removed afterwards.
struct ScratchDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appending(path: "peerkit-resources-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> URL { url.appending(path: name) }
    /// Every file in the directory (temporary files of a transfer included).
    func contents() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: url.path).sorted() }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Random bytes written to a file.
func randomFile(at url: URL, size: Int) throws -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
    try Data(bytes).write(to: url)
    return bytes
}

/// Keeps the last value of a progress stream.
func lastProgress(_ stream: AsyncStream<ResourceProgress>) -> Task<ResourceProgress?, Never> {
    Task {
        var last: ResourceProgress?
        for await step in stream { last = step }
        return last
    }
}

/// The peer timeout of the transceivers in ``ResourceTransferTests``: 30 s, not the default 2.5 s.
/// A transfer does not continue on another connection, so a heartbeat timeout fails it. In the
/// parallel run every suite's transceivers share NIO's two event loops on two cores, and once
/// (2026-12-08, in "two transfers at once") nothing arrived from the sending end for 2.5 s in the
/// middle of a transfer. These tests are about transfers; noticing a silent peer has tests of its
/// own (the heartbeat's, and `ResourceStallTests` for a transfer's stall).
let transferPeerTimeout: Duration = .seconds(30)

/// ``loopbackConfiguration(serviceType:name:peers:)`` with ``transferPeerTimeout``.
func transferConfiguration(serviceType: String, name: String, peers: [PeerEndpoint] = []) -> PeerConfiguration {
    var configuration = loopbackConfiguration(serviceType: serviceType, name: name, peers: peers)
    configuration.peerTimeout = transferPeerTimeout
    return configuration
}

@Suite("Resources between transceivers over loopback TCP")
struct ResourceTransferTests {
    @Test("a file arrives complete under its name, with progress on both sides ending finished")
    func fileRoundTrip() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let bytes = try randomFile(at: scratch.file("source.bin"), size: 3 * 256 * 1024 + 12_345)
        let (receiver, senders) = try await connectedStar(spokes: 1, peerTimeout: transferPeerTimeout)
        let sender = senders[0]
        defer { receiver.stop(); sender.stop() }
        let receivedProgress = Inbox<Task<ResourceProgress?, Never>>()
        receiver.receiveResources(named: "backup") { resource in
            receivedProgress.put(lastProgress(resource.progress))
            #expect(resource.size == Int64(bytes.count))
            #expect(resource.sender.id == sender.peerID)
            try await resource.write(to: scratch.file("received.bin"))
        }
        let peer = try #require(sender.connectedPeers.first)
        let transfer = try await sender.send(resource: .file(scratch.file("source.bin")), named: "backup", to: peer)
        let sent = lastProgress(transfer.progress)
        try await within(60, "the transfer") { try await transfer.finished() }
        #expect(try Data(contentsOf: scratch.file("received.bin")) == Data(bytes))
        let senderLast = try #require(await sent.value)
        #expect(senderLast.isFinished && senderLast.bytesDone == Int64(bytes.count) && senderLast.totalBytes == Int64(bytes.count))
        let receiverLast = try #require(await (try await receivedProgress.take(1))[0].value)
        #expect(receiverLast.isFinished && receiverLast.bytesDone == Int64(bytes.count))
        #expect(try scratch.contents() == ["received.bin", "source.bin"])
    }

    @Test("an async sequence of chunks arrives as chunks no longer than the chunk length, in order, digest checked")
    func sequenceToChunks() async throws {
        let (receiver, senders) = try await connectedStar(spokes: 1, peerTimeout: transferPeerTimeout)
        let sender = senders[0]
        defer { receiver.stop(); sender.stop() }
        let total: Int64 = 5 * 1024 * 1024 + 7
        let digests = Inbox<(String, Int64, Int)>()
        receiver.receiveResources(named: "stream") { resource in
            var hasher = SHA256()
            var count: Int64 = 0
            var longest = 0
            for try await chunk in resource.chunks {
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                count += Int64(chunk.readableBytes)
                longest = max(longest, chunk.readableBytes)
            }
            digests.put((ResourceDigest.hex(hasher.finalize()), count, longest))
        }
        var expected = SHA256()
        for try await chunk in PatternBytes(total: total) { chunk.withUnsafeReadableBytes { expected.update(bufferPointer: $0) } }
        let peer = try #require(sender.connectedPeers.first)
        let transfer = try await sender.send(resource: .chunks(PatternBytes(total: total)), named: "stream", to: peer)
        try await within(60, "the transfer") { try await transfer.finished() }
        let (digest, count, longest) = try await digests.take(1)[0]
        #expect(digest == ResourceDigest.hex(expected.finalize()))
        #expect(count == total)
        #expect(longest <= receiver.configuration.resourceChunkLength)
    }

    @Test("two transfers at once to the same peer both arrive intact")
    func twoAtOnce() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let first = try randomFile(at: scratch.file("one"), size: 2_000_000)
        let second = try randomFile(at: scratch.file("two"), size: 3_000_000)
        let (receiver, senders) = try await connectedStar(spokes: 1, peerTimeout: transferPeerTimeout)
        let sender = senders[0]
        defer { receiver.stop(); sender.stop() }
        let started = Inbox<String>()
        receiver.receiveResources(named: "file") { resource in
            started.put("started")
            try await resource.write(to: scratch.file("in-\(resource.size ?? 0)"))
        }
        let peer = try #require(sender.connectedPeers.first)
        let one = try await sender.send(resource: .file(scratch.file("one")), named: "file", to: peer)
        let two = try await sender.send(resource: .file(scratch.file("two")), named: "file", to: peer)
        try await within(60, "both transfers") {
            async let a: Void = one.finished()
            async let b: Void = two.finished()
            _ = try await (a, b)
        }
        #expect(try Data(contentsOf: scratch.file("in-2000000")) == Data(first))
        #expect(try Data(contentsOf: scratch.file("in-3000000")) == Data(second))
        #expect(try await started.take(2).count == 2)
    }

    @Test("the sender cancels midway: the receiver's write throws and leaves no file, not even a temporary one")
    func senderCancels() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let (receiver, senders) = try await connectedStar(spokes: 1, peerTimeout: transferPeerTimeout)
        let sender = senders[0]
        defer { receiver.stop(); sender.stop() }
        let outcome = Inbox<String>()
        let firstBytes = Inbox<Int64>()
        receiver.receiveResources(named: "big") { resource in
            let watcher = Task { for await step in resource.progress where step.bytesDone > 0 { firstBytes.put(step.bytesDone); break } }
            defer { watcher.cancel() }
            do {
                try await resource.write(to: scratch.file("big.bin"))
                outcome.put("completed")
            } catch let error as PeerKitError {
                outcome.put(error.description)
            }
        }
        let peer = try #require(sender.connectedPeers.first)
        let transfer = try await sender.send(resource: .chunks(PatternBytes(total: 1 << 30, pause: .milliseconds(20)), size: 1 << 30), named: "big", to: peer)
        _ = try await firstBytes.take(1, within: 60)
        transfer.cancel()
        await #expect(throws: PeerKitError.self) { try await transfer.finished() }
        let said = try await outcome.take(1, within: 30)[0]
        #expect(said.contains("was cancelled: the sender cancelled it"), "\(said)")
        #expect(try scratch.contents() == [])
        // The connection stays up for other traffic.
        #expect(receiver.connectedPeers.count == 1 && sender.connectedPeers.count == 1)
    }

    @Test("a transfer is a child task of the sending transceiver: when its run() returns after stop(), the transfer has ended with a sentence")
    func transferEndsWithTheSession() async throws {
        let serviceType = randomServiceType()
        let receiver = PeerTransceiver(configuration: transferConfiguration(serviceType: serviceType, name: "receiver"))
        try await receiver.start()
        defer { receiver.stop() }
        let sender = PeerTransceiver(configuration: transferConfiguration(serviceType: serviceType, name: "sender", peers: [try endpoint(of: receiver)]))
        let running = Task { try await sender.run() }
        defer { sender.stop() }
        let peer = try await sender.waitForPeer(timeout: .seconds(20))
        let firstBytes = Inbox<Int64>()
        receiver.receiveResources(named: "big") { resource in
            for try await chunk in resource.chunks { firstBytes.put(Int64(chunk.readableBytes)) }
        }
        let transfer = try await sender.send(resource: .chunks(PatternBytes(total: 1 << 30, pause: .milliseconds(20)), size: 1 << 30), named: "big", to: peer)
        _ = try await firstBytes.take(1, within: 60)
        sender.stop()
        try await within(30, "the sender's run() to return") { try await running.value }
        // Already ended: a transfer of the session cannot outlive it.
        let ended = Inbox<String>()
        let waiter = Task {
            do {
                try await transfer.finished()
                ended.put("completed")
            } catch let error as PeerKitError {
                ended.put(error.description)
            }
        }
        defer { waiter.cancel() }
        let said = try await ended.take(1, within: 1)[0]
        #expect(said != "completed" && said.hasSuffix("."), "\(said)")
    }

    @Test("the receiver cancels midway: the sender's transfer throws that the receiver cancelled it")
    func receiverCancels() async throws {
        let (receiver, senders) = try await connectedStar(spokes: 1, peerTimeout: transferPeerTimeout)
        let sender = senders[0]
        defer { receiver.stop(); sender.stop() }
        receiver.receiveResources(named: "big") { resource in
            for try await _ in resource.chunks {
                resource.cancel()
            }
        }
        let peer = try #require(sender.connectedPeers.first)
        let transfer = try await sender.send(resource: .chunks(PatternBytes(total: 1 << 30)), named: "big", to: peer)
        do {
            try await within(60, "the cancelled transfer") { try await transfer.finished() }
            Issue.record("the transfer completed although the receiver cancelled it")
        } catch let error as PeerKitError {
            guard error.code == .resourceRefused else {
                Issue.record("unexpected error: \(error)")
                return
            }
            #expect(error.name == "big")
            #expect(error.reason == "the receiver cancelled it")
        }
        #expect(sender.connectedPeers.count == 1)
    }

    @Test("a small request is answered while a 1 GiB resource is being sent on the same connection")
    func requestDuringLargeTransfer() async throws {
        let (receiver, senders) = try await connectedStar(spokes: 1, peerTimeout: transferPeerTimeout)
        let sender = senders[0]
        defer { receiver.stop(); sender.stop() }
        receiver.respond(to: Question.self) { question, _ in Answer(text: question.text, from: "receiver") }
        receiver.receiveResources(named: "huge") { resource in
            for try await _ in resource.chunks {}
        }
        let total: Int64 = 1 << 30
        let peer = try #require(sender.connectedPeers.first)
        let transfer = try await sender.send(resource: .chunks(PatternBytes(total: total), size: total), named: "huge", to: peer)
        let progress = NIOLockedValueBox<Int64>(0)
        let watcher = Task { for await step in transfer.progress { progress.withLockedValue { $0 = step.bytesDone } } }
        try await within(60, "the transfer to start") {
            while progress.withLockedValue({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        // How long a request waits is measured in bytes of the transfer, not seconds: a loaded
        // machine slows the chunks and the answer alike, but an answer queued behind the file
        // would wait for all of it.
        var mostBytesWaited: Int64 = 0
        var slowest = Duration.zero
        var answeredDuring = 0
        for index in 0..<20 {
            let before = progress.withLockedValue { $0 }
            let started = ContinuousClock.now
            let answer = try await sender.request(Question(text: "q\(index)"), to: peer, expecting: Answer.self, timeout: .seconds(20))
            slowest = max(slowest, ContinuousClock.now - started)
            let after = progress.withLockedValue { $0 }
            #expect(answer.text == "q\(index)")
            if after < total {
                answeredDuring += 1
                mostBytesWaited = max(mostBytesWaited, after - before)
            }
        }
        // The rest of the gigabyte is not needed: the requests are what is measured, and sending
        // all of it took about 13 s of CPU in a debug build (11 s user and 3 s system for the test
        // alone, `swift test` starting included), in the middle of the parallel suite. Other tests
        // see resources complete.
        let sent = progress.withLockedValue { $0 }
        transfer.cancel()
        do {
            try await within(60, "the 1 GiB transfer to end") { try await transfer.finished() }
        } catch let error as PeerKitError {
            #expect(error.code == .resourceCancelled, "\(error)")
        }
        watcher.cancel()
        print("request during 1 GiB: \(answeredDuring) of 20 answered during it, at most \(mostBytesWaited) bytes taken meanwhile, the slowest in \(slowest); cancelled after \(sent) bytes")
        #expect(answeredDuring > 0, "every request was answered only after the transfer finished")
        // The window is 4 MiB: an answer overtakes the file once the chunks already in flight are in.
        #expect(mostBytesWaited < 64 << 20, "a request waited while \(mostBytesWaited) bytes of the transfer were taken")
    }

    @Test("offers over the receiver's limits are refused with sentences naming the limit")
    func limits() async throws {
        let serviceType = randomServiceType()
        var configuration = transferConfiguration(serviceType: serviceType, name: "receiver")
        configuration.maximumIncomingResourceBytes = 1000
        configuration.maximumConcurrentIncomingResources = 1
        let receiver = PeerTransceiver(configuration: configuration)
        try await receiver.start()
        let sender = PeerTransceiver(configuration: transferConfiguration(serviceType: serviceType, name: "sender", peers: [try endpoint(of: receiver)]))
        try await sender.start()
        defer { receiver.stop(); sender.stop() }
        let peer = try await sender.waitForPeer(timeout: .seconds(20))
        let release = Inbox<Void>()
        let arriving = Inbox<Void>()
        receiver.receiveResources(named: "slow") { resource in
            arriving.put(())
            _ = try await release.take(1, within: 60)
            for try await _ in resource.chunks {}
        }
        func refusal(_ transfer: OutgoingResource) async throws -> String {
            do {
                try await within(30, "the refusal") { try await transfer.finished() }
                return "completed"
            } catch let error as PeerKitError {
                return error.description
            }
        }
        let unknown = try await refusal(try await sender.send(resource: .bytes([1, 2, 3]), named: "nobody", to: peer))
        #expect(unknown.contains("refused the resource \"nobody\": this peer refused it: no handler is registered for resources named \"nobody\"."), "\(unknown)")
        let tooLarge = try await refusal(try await sender.send(resource: .bytes(Array(repeating: 1, count: 1001)), named: "slow", to: peer))
        #expect(tooLarge.contains("it is 1001 bytes, over this peer's limit of 1000 bytes (PeerConfiguration.maximumIncomingResourceBytes)."), "\(tooLarge)")
        let first = try await sender.send(resource: .bytes([1]), named: "slow", to: peer)
        _ = try await arriving.take(1)
        let busy = try await refusal(try await sender.send(resource: .bytes([2]), named: "slow", to: peer))
        #expect(busy.contains("it is already receiving 1 resources, its limit (PeerConfiguration.maximumConcurrentIncomingResources)."), "\(busy)")
        release.put(())
        try await within(30, "the first transfer") { try await first.finished() }
        #expect(sender.connectedPeers.count == 1)
    }

    @Test("one peer gets at most its share of the receiver's slots; another peer still gets one")
    func perPeerLimit() async throws {
        let serviceType = randomServiceType()
        let receiver = PeerTransceiver(configuration: transferConfiguration(serviceType: serviceType, name: "receiver"))
        try await receiver.start()
        let greedy = PeerTransceiver(configuration: transferConfiguration(serviceType: serviceType, name: "greedy", peers: [try endpoint(of: receiver)]))
        let other = PeerTransceiver(configuration: transferConfiguration(serviceType: serviceType, name: "other", peers: [try endpoint(of: receiver)]))
        try await greedy.start()
        try await other.start()
        defer { receiver.stop(); greedy.stop(); other.stop() }
        let release = Inbox<Void>()
        let arriving = Inbox<String>()
        receiver.receiveResources(named: "held") { resource in
            arriving.put(resource.sender.name)
            _ = try await release.take(1, within: 60)
            for try await _ in resource.chunks {}
        }
        let toReceiver = try await greedy.waitForPeer(timeout: .seconds(20))
        var held: [OutgoingResource] = []
        for _ in 0..<2 { held.append(try await greedy.send(resource: .bytes([1]), named: "held", to: toReceiver)) }
        #expect(try await arriving.take(2) == ["greedy", "greedy"])
        let third = try await greedy.send(resource: .bytes([3]), named: "held", to: toReceiver)
        do {
            try await within(30, "the refusal") { try await third.finished() }
            Issue.record("a third resource from one peer was taken")
        } catch let error as PeerKitError {
            #expect(error.description.contains("it is already receiving 2 resources from this peer, its limit per peer (PeerConfiguration.maximumConcurrentIncomingResourcesPerPeer)."), "\(error)")
        }
        // The other peer's offer takes one of the two slots left.
        let fromOther = try await other.send(resource: .bytes([4]), named: "held", to: try await other.waitForPeer(timeout: .seconds(20)))
        #expect(try await arriving.take(1) == ["other"])
        for _ in 0..<3 { release.put(()) }
        for transfer in held + [fromOther] {
            try await within(30, "the held transfers") { try await transfer.finished() }
        }
    }
}
