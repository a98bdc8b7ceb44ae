import Foundation
import ListrKit
import NIOCore
import PeerKit
import Testing

/// Uploads of replacement lists against listrd's limit (issue 30): four peers that upload
/// 128 MiB each at the same moment. listrd holds at most ``ListrLimits/maximumPendingUploads`` (2)
/// uploads at once, counted from their first byte, so its memory grows by at most 2 × 128 MiB.
@Suite("listrd's uploads under concurrent attack")
struct ListrUploadAdversarialTests {
    /// 128 MiB of one repeated byte, in 1 MiB chunks, made on the fly.
    struct Filler: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        static let size: Int64 = 128 * 1024 * 1024

        struct AsyncIterator: AsyncIteratorProtocol {
            var remaining = Filler.size
            mutating func next() async throws -> ByteBuffer? {
                guard remaining > 0 else { return nil }
                let length = Int(Swift.min(1 << 20, remaining))
                remaining -= Int64(length)
                return ByteBuffer(repeating: UInt8(ascii: "x"), count: length)
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator() }
    }

    @Test("four concurrent 128 MiB uploads from four peers: listrd keeps at most two, refuses the others with a sentence, and grows by at most two")
    func concurrentUploads() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        let baseline = try ProcStatus.bytes("VmRSS", pid: daemon.pid)
        var uploaders: [PeerTransceiver] = []
        for index in 1...4 {
            var configuration = PeerConfiguration(serviceType: world.serviceType)
            configuration.advertises = false
            configuration.peerName = "uploader \(index)"
            configuration.discovery = .staticPeers([PeerEndpoint(host: "127.0.0.1", port: port)])
            let uploader = PeerTransceiver(configuration: configuration)
            try await uploader.start()
            uploaders.append(uploader)
        }
        defer { for uploader in uploaders { uploader.stop() } }
        var daemons: [Peer] = []
        for uploader in uploaders { daemons.append(try await uploader.waitForPeer(timeout: ListrFixture.deadline)) }

        // All four at once: each holds its upload until listrd has it all.
        let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
            for (uploader, daemon) in zip(uploaders, daemons) {
                group.addTask {
                    do {
                        let transfer = try await uploader.send(resource: .chunks(Filler(), size: Filler.size), named: ListrResources.replace, to: daemon)
                        try await transfer.finished()
                        return "kept"
                    } catch {
                        return "\(error)"
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let peak = try ProcStatus.bytes("VmHWM", pid: daemon.pid)
        let growth = peak - baseline
        let summary = "outcomes of four concurrent 128 MiB uploads: \(outcomes); listrd's RSS grew by \(growth / (1024 * 1024)) MiB at its peak"
        print(summary)
        let kept = outcomes.filter { $0 == "kept" }.count
        #expect(kept >= 1 && kept <= ListrLimits.maximumPendingUploads, "\(summary)")
        #expect(outcomes.filter { $0 != "kept" }.allSatisfy { $0.contains("uploaded lists waiting for their command, its limit") || $0.contains("its limit per address") }, "an upload failed for another reason than a limit: \(summary)")
        // Two uploads of 128 MiB, plus what ListrAdversarialTests allows for buffers and slack.
        #expect(growth < 2 * Int(Filler.size) + 64 * 1024 * 1024, "\(summary); the bound is 2 × 128 MiB plus 64 MiB")
    }
}
