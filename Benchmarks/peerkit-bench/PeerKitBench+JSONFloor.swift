import ArgumentParser
import Foundation

extension PeerKitBench {
    /// The JSON floor: Foundation's coders on the same envelope PeerKit sends, in one process, no I/O.
    struct JSONFloor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "json-floor",
            abstract: "Encode and decode the wire envelope of a BenchPayload with JSONEncoder/JSONDecoder."
        )

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
            let encoder = JSONEncoder()
            let decoder = JSONDecoder()
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
                let data = try encoder.encode(envelope)
                let encoded = clock.now
                let decoded = try decoder.decode(Envelope<BenchPayload>.self, from: data)
                let end = clock.now
                checksum &+= decoded.payload.seq
                if index >= warmup {
                    encodeSeconds += encoded.seconds(since: start)
                    decodeSeconds += end.seconds(since: encoded)
                    bytes = data.count
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
