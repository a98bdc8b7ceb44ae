import ArgumentParser
import Foundation
import NIOCore
import PeerKit
import Synchronization

extension PeerKitBench {
    /// The receiving side of the resource measurement: reads every resource named `bench` chunk
    /// by chunk (as an application that processes a stream would) and reports its bytes and memory.
    struct ResourceSink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resource-sink",
            abstract: "Receive resources named \"bench\" and report bytes and peak RSS when asked."
        )

        @Option(help: "The port to listen on; 0 picks a free one.")
        var port = 0

        @OptionGroup var common: CommonOptions

        final class Counter: Sendable {
            let bytes = Mutex<Int64>(0)
        }

        func run() async throws {
            common.startWatchdog("The resource sink")
            let rssBefore = ProcessMemory.residentBytes
            let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "resource-sink",
                                                    discovery: .none, listens: true, port: port, logLevel: common.logLevel, security: common.peerSecurity)
            let counter = Counter()
            transceiver.receiveResources(named: "bench") { resource in
                for try await chunk in resource.chunks {
                    counter.bytes.withLock { $0 += Int64(chunk.readableBytes) }
                }
            }
            transceiver.respond(to: ResourceSinkQuery.self) { _, _ in
                ResourceSinkReport(bytes: counter.bytes.withLock { $0 }, rssBeforeBytes: rssBefore, peakRSSBytes: ProcessMemory.peakResidentBytes)
            }
            let events = transceiver.events()
            try await transceiver.start()
            Report.emit(ReadyLine(port: transceiver.listeningPort ?? 0, ports: [transceiver.listeningPort ?? 0]))
            await events.firstDisconnection()
            await transceiver.shutdown()
        }
    }

    /// The sending side: sends `--size` bytes (generated in 1 MiB pieces, as the raw C source
    /// sends from memory) as one resource, and prints the rate and both sides' peak RSS growth.
    struct ResourceSource: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resource-source",
            abstract: "Send one resource of --size bytes to the resource sink and print MB/s and memory."
        )

        @Option(help: "The sink's HOST:PORT.")
        var connect: String

        @Option(help: "The resource's size in bytes.")
        var size: Int64 = 1 << 30

        @OptionGroup var common: CommonOptions

        struct Output: Encodable {
            let bytes: Int64
            let seconds: Double
            let MBps: Double
            let senderRSSGrowthMiB: Double
            let receiverRSSGrowthMiB: Double
        }

        struct Generated: AsyncSequence, Sendable {
            typealias Element = ByteBuffer
            let total: Int64
            struct AsyncIterator: AsyncIteratorProtocol {
                var remaining: Int64
                let piece = ByteBuffer(repeating: 0x5a, count: 1 << 20)
                mutating func next() async -> ByteBuffer? {
                    guard remaining > 0 else { return nil }
                    let length = Int(Swift.min(Int64(piece.readableBytes), remaining))
                    remaining -= Int64(length)
                    return piece.getSlice(at: 0, length: length)
                }
            }
            func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: total) }
        }

        func run() async throws {
            common.startWatchdog("The resource source")
            let rssBefore = ProcessMemory.residentBytes
            let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "resource-source",
                                                    discovery: .staticPeers(BenchTransceiver.endpoints([connect])), listens: false,
                                                    logLevel: common.logLevel, security: common.peerSecurity)
            try await transceiver.start()
            let peer = try await transceiver.waitForPeer(timeout: .seconds(20))
            let start = ContinuousClock.now
            let transfer = try await transceiver.send(resource: .chunks(Generated(total: size), size: size), named: "bench", to: peer)
            try await transfer.finished()
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let sink = try await transceiver.request(ResourceSinkQuery(), to: peer, expecting: ResourceSinkReport.self, timeout: .seconds(20))
            guard sink.bytes == size else {
                Report.fail("The sink counted \(sink.bytes) bytes, not \(size).")
            }
            Report.emit(Output(
                bytes: size, seconds: seconds, MBps: Double(size) / seconds / 1e6,
                senderRSSGrowthMiB: Double(ProcessMemory.peakResidentBytes - rssBefore) / 1_048_576,
                receiverRSSGrowthMiB: Double(sink.peakRSSBytes - sink.rssBeforeBytes) / 1_048_576
            ))
            await transceiver.shutdown()
        }
    }
}
