import Foundation
import NIOCore
import PeerKitTesting
import Synchronization
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// A type's own payload coding (``PeerPayloadCodable``) held to the `Codable` path: the same bytes
/// out, and for any payload, valid or not, the same value or the same error in. Generated cases
/// are seeded (PEERKIT_JSON_SEED and PEERKIT_JSON_CASES as in the JSON differential tests), and
/// each failure names its seed and case.
@Suite("A type's own payload coding agrees with Codable")
struct PeerPayloadCodableTests {
    typealias Sample = JSONDifferentialTests.Sample

    /// ``Sample`` with its own payload coding: every member kind the writer and reader offer, in
    /// `Sample`'s order, under the same wire key, so that errors read alike too.
    struct OwnSample: PeerPayloadCodable, PeerMessage {
        static var messageType: String { "Sample" }
        var sample: Sample

        init(_ sample: Sample) { self.sample = sample }

        func encode(to encoder: any Encoder) throws { try sample.encode(to: encoder) }
        init(from decoder: any Decoder) throws { sample = try Sample(from: decoder) }

        func encode(to payload: inout PayloadWriter) throws {
            payload.write(sample.string, forKey: "string")
            payload.write(sample.int, forKey: "int")
            payload.write(sample.int8, forKey: "int8")
            payload.write(sample.uint16, forKey: "uint16")
            payload.write(sample.int64, forKey: "int64")
            payload.write(sample.uint64, forKey: "uint64")
            try payload.write(sample.double, forKey: "double")
            try payload.write(sample.float, forKey: "float")
            payload.write(sample.bool, forKey: "bool")
            try payload.writeIfPresent(sample.optional, forKey: "optional")
            try payload.write(sample.numbers, forKey: "numbers")
            try payload.write(sample.map, forKey: "map")
            try payload.write(sample.kind, forKey: "kind")
            try payload.write(sample.data, forKey: "data")
            try payload.write(sample.date, forKey: "date")
            try payload.writeIfPresent(sample.url, forKey: "url")
            try payload.write(sample.children, forKey: "children")
        }

        init(from payload: PayloadReader) throws {
            sample = Sample(
                string: try payload.read(String.self, forKey: "string"),
                int: try payload.read(Int.self, forKey: "int"),
                int8: try payload.read(Int8.self, forKey: "int8"),
                uint16: try payload.read(UInt16.self, forKey: "uint16"),
                int64: try payload.read(Int64.self, forKey: "int64"),
                uint64: try payload.read(UInt64.self, forKey: "uint64"),
                double: try payload.read(Double.self, forKey: "double"),
                float: try payload.read(Float.self, forKey: "float"),
                bool: try payload.read(Bool.self, forKey: "bool"),
                optional: try payload.readIfPresent(String.self, forKey: "optional"),
                numbers: try payload.read([Int].self, forKey: "numbers"),
                map: try payload.read([String: Double].self, forKey: "map"),
                kind: try payload.read(JSONDifferentialTests.Kind.self, forKey: "kind"),
                data: try payload.read(Data.self, forKey: "data"),
                date: try payload.read(Date.self, forKey: "date"),
                url: try payload.readIfPresent(URL.self, forKey: "url"),
                children: try payload.read([Sample].self, forKey: "children"))
        }
    }

    /// The members `Sample`'s `Encodable` conformance writes, each value as JSON text, in order.
    static func members(of sample: Sample) throws -> [(key: String, value: String)] {
        func json(_ value: some Encodable) throws -> String { String(buffer: try PayloadEncoder.encode(value)) }
        var members: [(key: String, value: String)] = [
            ("string", try json(sample.string)), ("int", try json(sample.int)), ("int8", try json(sample.int8)),
            ("uint16", try json(sample.uint16)), ("int64", try json(sample.int64)), ("uint64", try json(sample.uint64)),
            ("double", try json(sample.double)), ("float", try json(sample.float)), ("bool", try json(sample.bool)),
        ]
        if let optional = sample.optional { members.append(("optional", try json(optional))) }
        members += [("numbers", try json(sample.numbers)), ("map", try json(sample.map)), ("kind", try json(sample.kind)),
                    ("data", try json(sample.data)), ("date", try json(sample.date))]
        if let url = sample.url { members.append(("url", try json(url))) }
        members.append(("children", try json(sample.children)))
        return members
    }

    /// What decoding `payload` as `T` gives: the sample, or the error's description.
    static func outcome<T: Decodable & SendableMetatype>(_ type: T.Type, _ payload: ByteBuffer, through envelope: Bool, sample: (T) -> Sample) -> Result<Sample, DescribedError> {
        do {
            if envelope {
                // The transceiver's path: the envelope scan checks the payload, a handler's decoder reads it.
                let frame = EnvelopeEncoder.frame(type: "Sample", id: nil, replyTo: nil, payload: payload.readableBytesView)
                var body = frame
                body.moveReaderIndex(forwardBy: 4)
                let parsed = try EnvelopeParser.parse(body)
                return .success(sample(try MessageCodec.decoder(for: T.self)(parsed)))
            }
            return .success(sample(try MessageCodec.decode(T.self, from: payload)))
        } catch {
            return .failure(DescribedError(description: "\(error)"))
        }
    }

    struct DescribedError: Error, Equatable {
        let description: String
    }

    static func agree(_ a: Result<Sample, DescribedError>, _ b: Result<Sample, DescribedError>) -> Bool {
        switch (a, b) {
        case let (.success(x), .success(y)): return JSONDifferentialTests.sameBits(x, y)
        case let (.failure(x), .failure(y)): return x == y
        default: return false
        }
    }

    // MARK: Bytes out

    @Test("generated values are written as the same bytes as through Encodable, and read back alike")
    func sameBytes() throws {
        var random = SeededGenerator(seed: JSONDifferentialTests.seed ^ 0x0C0D)
        for index in 0..<JSONDifferentialTests.cases {
            let sample = random.sample(depth: 2)
            let context = "seed \(JSONDifferentialTests.seed), case \(index)"
            let own = try MessageCodec.encode(OwnSample(sample))
            let codable = try PayloadEncoder.encode(sample)
            #expect(own.payload == codable, "\(context): \(String(buffer: own.payload)) differs from \(String(buffer: codable))")
            let back = try MessageCodec.decode(OwnSample.self, from: own.payload)
            #expect(JSONDifferentialTests.sameBits(back.sample, sample), "\(context)")
        }
    }

    // MARK: Payloads in

    @Test("payloads with members reordered, unknown, repeated, missing, mistyped, escaped or broken read alike")
    func samePayloadOutcomes() throws {
        var random = SeededGenerator(seed: JSONDifferentialTests.seed ^ 0x0E0D)
        var decoded = 0
        var failed = 0
        for index in 0..<(JSONDifferentialTests.cases * 5) {
            let context = "seed \(JSONDifferentialTests.seed), case \(index)"
            var members = try Self.members(of: random.sample(depth: 1))
            members.shuffle(using: &random)
            if random.chance(30) { members.insert(("unknown", random.pick(["1", "null", "{\"a\":[]}", "\"x\""])), at: Int.random(in: 0...members.count, using: &random)) }
            if random.chance(30) {
                // The same key again, with another sample's value or a value of another kind.
                let other = try Self.members(of: random.sample(depth: 0))
                let repeated = random.pick(other)
                let value = random.chance(50) ? repeated.value : random.pick(["null", "\"text\"", "-1", "1.5", "[]"])
                members.insert((repeated.key, value), at: Int.random(in: 0...members.count, using: &random))
            }
            if random.chance(15), !members.isEmpty { members.remove(at: Int.random(in: 0..<members.count, using: &random)) }
            if random.chance(15), !members.isEmpty {
                let at = Int.random(in: 0..<members.count, using: &random)
                members[at].value = random.pick(["null", "true", "\"1\"", "1e3", "-0", "1.0", "18446744073709551616", "{}", "[1]"])
            }
            if random.chance(15), !members.isEmpty {
                // A key spelt with an escape: the same name to both readers.
                let at = Int.random(in: 0..<members.count, using: &random)
                if let first = members[at].key.unicodeScalars.first {
                    members[at].key = String(format: "\\u%04x", first.value) + members[at].key.unicodeScalars.dropFirst().map(String.init).joined()
                }
            }
            var text = Array(("{" + members.map { "\"\($0.key)\":" + random.whitespace() + $0.value }.joined(separator: ",") + "}").utf8)
            if random.chance(20) { text = random.mutate(text) }
            let payload = ByteBuffer(bytes: text)
            for envelope in [false, true] {
                let codable = Self.outcome(Sample.self, payload, through: envelope) { $0 }
                let own = Self.outcome(OwnSample.self, payload, through: envelope) { $0.sample }
                #expect(Self.agree(codable, own), "\(context), envelope \(envelope): \(String(decoding: text, as: UTF8.self))\nCodable: \(codable)\nown: \(own)")
                if case .success = codable { decoded += 1 } else { failed += 1 }
            }
        }
        // Both kinds of outcome were compared, not only one.
        #expect(decoded > JSONDifferentialTests.cases && failed > JSONDifferentialTests.cases, "decoded \(decoded), failed \(failed)")
    }

    @Test("a missing key and a mistyped value are named as for Codable types")
    func errorsName() throws {
        do {
            _ = try MessageCodec.decode(OwnSample.self, from: ByteBuffer(string: #"{"string":1}"#))
            Issue.record("A number where a string belongs decoded.")
        } catch {
            #expect("\(error)" == "The payload of a Sample message could not be decoded: \"string\" is not of type String.")
        }
        do {
            _ = try MessageCodec.decode(OwnSample.self, from: ByteBuffer(string: #"{"string":"a"}"#))
            Issue.record("A payload without most of its keys decoded.")
        } catch {
            #expect("\(error)" == "The payload of a Sample message could not be decoded: the key \"int\" is missing from the payload.")
        }
        do {
            _ = try MessageCodec.decode(OwnSample.self, from: ByteBuffer(string: #"[1]"#))
            Issue.record("An array decoded as an object.")
        } catch {
            #expect("\(error)".hasPrefix("The payload of a Sample message could not be decoded: the payload is not of type Dictionary"))
        }
    }

    // MARK: Writing

    struct Twice: PeerPayloadEncodable {
        func encode(to encoder: any Encoder) throws {}
        func encode(to payload: inout PayloadWriter) throws {
            payload.write("a", forKey: "name")
            payload.write(1, forKey: "count")
            payload.write("b", forKey: "name")
        }
    }

    @Test("a key written twice fails the encoding, naming the key")
    func repeatedKey() {
        #expect {
            try MessageCodec.encode(Twice())
        } throws: { error in
            "\(error)" == "A Twice value could not be encoded as JSON: the key \"name\" was written twice, and a payload may hold each key once."
        }
    }

    /// Writes more keys than the writer compares in place, the last one again when `repeatLast`.
    struct Many: PeerPayloadEncodable {
        var repeatLast: Bool
        func encode(to encoder: any Encoder) throws {}
        func encode(to payload: inout PayloadWriter) throws {
            let keys: [StaticString] = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"]
            for (index, key) in keys.enumerated() { payload.write(index, forKey: key) }
            if repeatLast { payload.write(0, forKey: "k11") }
            payload.write(true, forKey: "last")
        }
    }

    @Test("repeated keys are found among many keys too")
    func repeatedAmongMany() throws {
        let message = try MessageCodec.encode(Many(repeatLast: false))
        #expect(String(buffer: message.payload) == #"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"last":true}"#)
        #expect(throws: PeerKitError.self) { try MessageCodec.encode(Many(repeatLast: true)) }
    }

    struct Skipping: PeerPayloadEncodable {
        func encode(to encoder: any Encoder) throws {}
        func encode(to payload: inout PayloadWriter) throws {
            payload.write("a", forKey: "before")
            try? payload.write(Double.infinity, forKey: "infinite")
            try? payload.write(["x": Float.nan], forKey: "nested")
            payload.write("\"quoted\"\n", forKey: "after")
            payload.write(false, forKey: "infinite")
        }
    }

    @Test("a member whose value cannot be written leaves nothing behind, and its key stays free")
    func failedMemberLeavesNothing() throws {
        let message = try MessageCodec.encode(Skipping())
        #expect(String(buffer: message.payload) == #"{"before":"a","after":"\"quoted\"\n","infinite":false}"#)
        #expect(throws: EncodingError.self) {
            var payload = PayloadWriter(appendingTo: ByteBuffer())
            try payload.write(Double.nan, forKey: "x")
        }
    }

    struct Readings: Codable, PeerMessage {
        static var messageType: String { "Readings" }
        var values: [String: Double]
    }

    struct OwnReadings: PeerPayloadEncodable, PeerMessage {
        static var messageType: String { "Readings" }
        var values: [String: Double]
        func encode(to payload: inout PayloadWriter) throws { try payload.write(values, forKey: "values") }
    }

    @Test("a nested value that cannot be encoded fails with the error Codable gives, its path included")
    func nestedFailureReadsAlike() {
        func failure(_ encode: () throws -> EncodedMessage) -> String {
            do {
                _ = try encode()
                return "encoded"
            } catch {
                return "\(error)"
            }
        }
        let codable = failure { try MessageCodec.encode(Readings(values: ["x": .infinity])) }
        let own = failure { try MessageCodec.encode(OwnReadings(values: ["x": .infinity])) }
        #expect(codable.contains("values.x"), "\(codable)")
        #expect(own == codable)
    }

    // MARK: Between peers

    /// The README's example, through `Codable`...
    struct AddItemCommand: Codable, Equatable, PeerMessage {
        static var messageType: String { "AddItemCommand" }
        let title: String
        let priority: Int
        let note: String?
    }

    /// ...and with its own payload coding, as the README and the DocC article write it.
    struct OwnAddItemCommand: PeerPayloadCodable, Equatable, PeerMessage {
        static var messageType: String { "AddItemCommand" }
        let title: String
        let priority: Int
        let note: String?

        init(title: String, priority: Int, note: String?) {
            self.title = title
            self.priority = priority
            self.note = note
        }

        func encode(to payload: inout PayloadWriter) throws {
            payload.write(title, forKey: "title")
            payload.write(priority, forKey: "priority")
            try payload.writeIfPresent(note, forKey: "note")
        }

        init(from payload: PayloadReader) throws {
            title = try payload.read(String.self, forKey: "title")
            priority = try payload.read(Int.self, forKey: "priority")
            note = try payload.readIfPresent(String.self, forKey: "note")
        }
    }

    /// What a handler received, in order.
    final class Inbox<Value: Sendable>: Sendable {
        private let values = Mutex<[Value]>([])
        func append(_ value: Value) { values.withLock { $0.append(value) } }
        var received: [Value] { values.withLock { $0 } }
    }

    @Test("own-coded messages reach Codable handlers, and Codable ones own-coded handlers, in sends and requests")
    func betweenPeers() async throws {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        let bobsInbox = Inbox<AddItemCommand>()
        bob.receive(AddItemCommand.self) { command, _ in bobsInbox.append(command) }
        alice.respond(to: OwnAddItemCommand.self) { command, _ in
            AddItemCommand(title: command.title.uppercased(), priority: command.priority + 1, note: command.note)
        }
        try await network.waitUntilConnected(alice, bob)

        try await alice.send(OwnAddItemCommand(title: "a \"long\" title, é", priority: 1, note: nil), to: alice.connectedPeers)
        try await network.eventually("bob received alice's command") { bobsInbox.received.count == 1 }
        #expect(bobsInbox.received == [AddItemCommand(title: "a \"long\" title, é", priority: 1, note: nil)])

        let peer = try #require(bob.connectedPeers.first)
        async let reply = bob.request(OwnAddItemCommand(title: "milk", priority: 41, note: "2 l"), to: peer,
                                      expecting: OwnAddItemCommand.self, timeout: .seconds(10))
        await network.settle()
        #expect(try await reply == OwnAddItemCommand(title: "MILK", priority: 42, note: "2 l"))
        await network.shutdown()
    }
}
