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
            /// No `Codable`: the envelope and `BenchPayload`'s two members written and read by
            /// hand over PeerKit's JSON writer and reader (`DirectCoder`). Not a codec PeerKit
            /// offers: the floor that one made for each type (generated, or written by hand)
            /// could reach, which says what `Codable`'s generic containers cost the others.
            case direct
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
            case .direct: try measure(DirectCoder())
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
                let decoded = try coder.decode(encodedBytes)
                let end = clock.now
                // Every message round-trips: its number each time, its text and type once.
                guard decoded.payload.seq == index, index > 0 || (decoded.payload.text == template.text && decoded.type == envelope.type) else {
                    Report.fail("Message \(index) did not round-trip: it came back with seq \(decoded.payload.seq).")
                }
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

/// A JSON codec as the floor times it, on the envelope of a `BenchPayload`: each in the bytes its
/// users have (Foundation's in `Data`, PeerKit's in a `ByteBuffer`, as frames carry them), so that
/// none pays for a conversion.
protocol BenchCoder {
    typealias Envelope = PeerKitBench.JSONFloor.Envelope<BenchPayload>
    associatedtype Bytes
    func encode(_ envelope: Envelope) throws -> Bytes
    func decode(_ bytes: Bytes) throws -> Envelope
    func count(_ bytes: Bytes) -> Int
}

/// Foundation's `JSONEncoder` and `JSONDecoder`, made once.
struct FoundationCoder: BenchCoder {
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    func encode(_ envelope: Envelope) throws -> Data { try encoder.encode(envelope) }
    func decode(_ bytes: Data) throws -> Envelope { try decoder.decode(Envelope.self, from: bytes) }
    func count(_ bytes: Data) -> Int { bytes.count }
}

/// PeerKit's `PayloadEncoder` and `PayloadDecoder`, which carry every payload PeerKit sends and receives.
struct PeerKitCoder: BenchCoder {
    func encode(_ envelope: Envelope) throws -> ByteBuffer { try PayloadEncoder.encode(envelope) }
    func decode(_ bytes: ByteBuffer) throws -> Envelope { try PayloadDecoder.decode(Envelope.self, from: bytes) }
    func count(_ bytes: ByteBuffer) -> Int { bytes.readableBytes }
}

/// The envelope `{"type":"BenchPayload","payload":{"text":…,"seq":…}}` written and read by hand,
/// with PeerKit's string writer and JSON reader and no `Codable`: the floor of a codec made for the
/// one type (see ``PeerKitBench/JSONFloor/Codec/direct``). It reads its members in any order,
/// checks the syntax around them as PeerKit's reader does, and refuses an object that lacks one.
struct DirectCoder: BenchCoder {
    /// Why bytes are not a `BenchPayload`'s envelope (the JSON reader's own errors say why they are
    /// not JSON).
    struct NotAnEnvelope: Error, CustomStringConvertible {
        let description: String
    }

    func encode(_ envelope: Envelope) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: envelope.payload.text.utf8.count + 64)
        JSONStringWriter.write(envelope.type, into: &buffer, prefix: "{\"type\":", suffix: "")
        if let id = envelope.id { JSONStringWriter.write(id, into: &buffer, prefix: ",\"id\":", suffix: "") }
        JSONStringWriter.write(envelope.payload.text, into: &buffer, prefix: ",\"payload\":{\"text\":", suffix: ",\"seq\":")
        buffer.writeString(String(envelope.payload.seq))
        buffer.writeStaticString("}}")
        return buffer
    }

    func decode(_ bytes: ByteBuffer) throws -> Envelope {
        try bytes.withUnsafeReadableBytes { bytes in
            let reader = unsafe JSONReader(bytes: bytes)
            var kind: String?
            var id: String?
            var payload: BenchPayload?
            try Self.forEachMember(ofObjectAt: reader.skipWhitespace(from: 0), in: reader) { member, _ in
                if reader.plainNameEquals(at: member.nameStart, end: member.nameEnd, "type") {
                    kind = try reader.string(at: member.value)
                } else if reader.plainNameEquals(at: member.nameStart, end: member.nameEnd, "id") {
                    id = try reader.string(at: member.value)
                } else if reader.plainNameEquals(at: member.nameStart, end: member.nameEnd, "payload") {
                    payload = try Self.payload(at: member.value, in: reader)
                }
            }
            guard let kind else { throw NotAnEnvelope(description: "The envelope has no \"type\" member.") }
            guard let payload else { throw NotAnEnvelope(description: "The envelope has no \"payload\" member.") }
            return .init(type: kind, payload: payload, id: id)
        }
    }

    /// The `BenchPayload` whose object starts at `offset`.
    private static func payload(at offset: Int, in reader: JSONReader) throws -> BenchPayload {
        var text: String?
        var seq: Int?
        try forEachMember(ofObjectAt: offset, in: reader) { member, end in
            if reader.plainNameEquals(at: member.nameStart, end: member.nameEnd, "text") {
                text = try reader.string(at: member.value)
            } else if reader.plainNameEquals(at: member.nameStart, end: member.nameEnd, "seq") {
                seq = try integer(from: member.value, to: end, in: reader)
            }
        }
        guard let text, let seq else { throw NotAnEnvelope(description: "The payload lacks its \"text\" or its \"seq\" member.") }
        var payload = BenchPayload(size: 0, seq: seq)
        payload.text = text
        return payload
    }

    /// Calls `body` with each member of the object whose brace is at `offset`, and where its value
    /// ends, checking the syntax around them.
    private static func forEachMember(ofObjectAt offset: Int, in reader: JSONReader, _ body: (JSONMemberCursor.Member, Int) throws -> Void) throws {
        var members = JSONMemberCursor(objectAt: offset, in: reader)
        while let member = try members.next() {
            let end = try reader.skipValue(at: member.value)
            try body(member, end)
            try members.valueEnds(at: end)
        }
    }

    /// The integer written in `reader`'s bytes `start..<end`.
    private static func integer(from start: Int, to end: Int, in reader: JSONReader) throws -> Int {
        let negative = reader.byte(at: start) == UInt8(ascii: "-")
        var value = 0
        for index in (negative ? start + 1 : start)..<end {
            guard let byte = reader.byte(at: index), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte),
                  case let (times, false) = value.multipliedReportingOverflow(by: 10),
                  case let (sum, false) = times.addingReportingOverflow(Int(byte - UInt8(ascii: "0"))) else {
                throw NotAnEnvelope(description: "The payload's \"seq\" is not an integer that fits in an Int.")
            }
            value = sum
        }
        return negative ? -value : value
    }

    func count(_ bytes: ByteBuffer) -> Int { bytes.readableBytes }
}
