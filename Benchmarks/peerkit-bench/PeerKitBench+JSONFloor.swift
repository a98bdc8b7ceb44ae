import ArgumentParser
import Foundation
import NIOCore
import PeerKitJSON

extension PeerKitBench {
    /// The JSON floor: Foundation's coders on the same envelope PeerKit sends, in one process, no I/O;
    /// with `--codec peerkit`, PeerKit's own coders on the same value, so that the gain of PeerKit's
    /// codec over Foundation's stays visible in every run.
    struct JSONFloor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "json-floor",
            abstract: "Encode and decode the wire envelope of a BenchPayload with JSONEncoder/JSONDecoder (or PeerKit's codec)."
        )

        /// Whose coders to time.
        enum Codec: String, ExpressibleByArgument, CaseIterable {
            /// Foundation's `JSONEncoder` and `JSONDecoder` (bytes in `Data`).
            case foundation
            /// PeerKit's `PayloadEncoder` and `PayloadDecoder` (bytes in a `ByteBuffer`), which
            /// carry every payload PeerKit sends and receives.
            case peerkit
        }

        /// The envelope of protocol v1: `{"type":…,"payload":…}` (plus `id` on requests).
        struct Envelope<Payload: Codable>: Codable {
            var type: String
            var payload: Payload
            var id: String?
        }

        @Option(help: "The payload's JSON size in bytes.")
        var size = 100

        @Option(help: "How many encode+decode pairs to time.")
        var count = 100_000

        @Option(help: "Whose coders to time: foundation or peerkit.")
        var codec = Codec.foundation

        @OptionGroup var common: CommonOptions

        /// What the floor prints.
        struct Output: Encodable {
            let messages: Int
            let envelopeBytes: Int
            let encodeus: Double
            let decodeus: Double
            let microsecondsPerMessage: Double
            let msgsPerSec: Double
            let MBps: Double
        }

        func run() async throws {
            common.startWatchdog("The JSON floor")
            switch codec {
            case .foundation: try measure(FoundationCoder())
            case .peerkit: try measure(PeerKitCoder())
            }
        }

        /// Times `count` encode+decode pairs of the envelope with `coder`, after a tenth as many
        /// to warm up, and prints the figures.
        private func measure<Coder: BenchCoder>(_ coder: Coder) throws {
            let template = BenchPayload(size: size, seq: 0)
            var envelope = Envelope(type: "BenchPayload", payload: template, id: nil)
            let warmup = max(count / 10, 1)
            var bytes = 0
            var checksum = 0
            var encodeSeconds = 0.0
            var decodeSeconds = 0.0
            let clock = ContinuousClock()
            for index in 0..<(warmup + count) {
                envelope.payload.seq = index
                let start = clock.now
                let encodedBytes = try coder.encode(envelope)
                let encoded = clock.now
                let decoded = try coder.decode(Envelope<BenchPayload>.self, from: encodedBytes)
                let end = clock.now
                checksum &+= decoded.payload.seq
                if index >= warmup {
                    encodeSeconds += encoded.seconds(since: start)
                    decodeSeconds += end.seconds(since: encoded)
                    bytes = coder.count(encodedBytes)
                }
            }
            guard checksum != 0 || count + warmup == 1 else { Report.fail("The decoded values did not round-trip.") }
            let perMessage = (encodeSeconds + decodeSeconds) / Double(count)
            Report.emit(Output(messages: count, envelopeBytes: bytes,
                               encodeus: encodeSeconds / Double(count) * 1e6,
                               decodeus: decodeSeconds / Double(count) * 1e6,
                               microsecondsPerMessage: perMessage * 1e6,
                               msgsPerSec: 1 / perMessage,
                               MBps: Double(template.nominalSize) / perMessage / 1e6))
        }
    }
}

/// A JSON codec as the floor times it: each in the bytes its users have (Foundation's in `Data`,
/// PeerKit's in a `ByteBuffer`, as frames carry them), so that neither pays for a conversion.
protocol BenchCoder {
    associatedtype Bytes
    func encode<T: Encodable>(_ value: T) throws -> Bytes
    func decode<T: Decodable>(_ type: T.Type, from bytes: Bytes) throws -> T
    func count(_ bytes: Bytes) -> Int
}

/// Foundation's `JSONEncoder` and `JSONDecoder`, made once.
struct FoundationCoder: BenchCoder {
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    func encode<T: Encodable>(_ value: T) throws -> Data { try encoder.encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: Data) throws -> T { try decoder.decode(T.self, from: bytes) }
    func count(_ bytes: Data) -> Int { bytes.count }
}

/// PeerKit's `PayloadEncoder` and `PayloadDecoder`, which carry every payload PeerKit sends and receives.
struct PeerKitCoder: BenchCoder {
    func encode<T: Encodable>(_ value: T) throws -> ByteBuffer { try PayloadEncoder.encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: ByteBuffer) throws -> T { try PayloadDecoder.decode(T.self, from: bytes) }
    func count(_ bytes: ByteBuffer) -> Int { bytes.readableBytes }
}
