import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// Differential test: PeerKit's JSON codec against Foundation's JSONEncoder/JSONDecoder over
/// generated values and documents. Whatever both accept must give the same result. Reproducible:
/// the generator is seeded (PEERKIT_JSON_SEED overrides the seed, PEERKIT_JSON_CASES the count), and
/// every failure names the seed and case that produced it.
@Suite("JSON codec agrees with Foundation on generated values and documents")
struct JSONDifferentialTests {
    static let seed: UInt64 = ProcessInfo.processInfo.environment["PEERKIT_JSON_SEED"].flatMap { UInt64($0) } ?? 0x5EED_2026_1122
    static let cases: Int = ProcessInfo.processInfo.environment["PEERKIT_JSON_CASES"].flatMap { Int($0) } ?? 400

    // MARK: Generated values

    enum Kind: String, Codable, CaseIterable { case alpha, beta, gamma }

    struct Sample: Codable, Equatable {
        var string: String
        var int: Int
        var int8: Int8
        var uint16: UInt16
        var int64: Int64
        var uint64: UInt64
        var double: Double
        var float: Float
        var bool: Bool
        var optional: String?
        var numbers: [Int]
        var map: [String: Double]
        var kind: Kind
        var data: Data
        var date: Date
        var url: URL?
        var children: [Sample]
    }

    /// Compares doubles by bits, so -0.0 and 0.0 differ (their JSON does).
    static func sameBits(_ a: Sample, _ b: Sample) -> Bool {
        a == b && a.double.bitPattern == b.double.bitPattern && a.float.bitPattern == b.float.bitPattern
            && zip(a.children, b.children).allSatisfy(sameBits)
    }

    /// Foundation's JSONEncoder writes keys in no fixed order (on Linux it changes between runs),
    /// so the two encoders' documents are compared as JSON values, read back by one decoder.
    @Test("generated values encode to the same JSON as JSONEncoder and decode to the same values as JSONDecoder")
    func generatedValues() throws {
        var random = SeededGenerator(seed: Self.seed)
        let foundationEncoder = JSONEncoder()
        foundationEncoder.outputFormatting = .withoutEscapingSlashes
        for index in 0..<Self.cases {
            let value = random.sample(depth: 2)
            let context = "seed \(Self.seed), case \(index) (set PEERKIT_JSON_SEED=\(Self.seed) to reproduce)"
            let ours = try PayloadEncoder.encode(value)
            let theirs = try foundationEncoder.encode(value)
            let oursRead = try JSONDecoder().decode(JSONValue.self, from: Data(ours.readableBytesView))
            let theirsRead = try JSONDecoder().decode(JSONValue.self, from: theirs)
            #expect(oursRead == theirsRead, "\(context): \(String(buffer: ours)) differs from \(String(decoding: theirs, as: UTF8.self))")
            for text in [ours, ByteBuffer(bytes: theirs)] {
                let decodedByUs = try PayloadDecoder.decode(Sample.self, from: text)
                let decodedByFoundation = try JSONDecoder().decode(Sample.self, from: Data(text.readableBytesView))
                #expect(Self.sameBits(decodedByUs, decodedByFoundation), "\(context)")
                #expect(Self.sameBits(decodedByUs, value), "\(context)")
            }
        }
    }

    // MARK: Generated documents

    @Test("generated documents, valid and mutated, decode to the same JSON values whenever both decoders accept them")
    func generatedDocuments() throws {
        var random = SeededGenerator(seed: Self.seed ^ 0xD0C)
        var bothAccepted = 0
        var identical = 0
        var total = 0
        for index in 0..<(Self.cases * 5) {
            var text = random.document(depth: 4)
            if index % 3 == 2 { text = random.mutate(text) }
            total += 1
            let context = "seed \(Self.seed), document \(index) (set PEERKIT_JSON_SEED=\(Self.seed) to reproduce): \(String(decoding: text.prefix(300), as: UTF8.self))"
            let ours = Result { try PayloadDecoder.decode(JSONValue.self, from: ByteBuffer(bytes: text)) }
            let theirs = Result { try JSONDecoder().decode(JSONValue.self, from: Data(text)) }
            guard case let .success(mine) = ours, case let .success(foundation) = theirs else { continue }
            bothAccepted += 1
            if mine == foundation { identical += 1 }
            #expect(mine.agrees(with: foundation), "\(context): \(mine) differs from \(foundation)")
        }
        // The comparison means something only if most documents were accepted by both.
        #expect(bothAccepted * 2 > total, "only \(bothAccepted) of \(total) documents were accepted by both decoders")
        // And most of those must match exactly, every number read the same way by both.
        #expect(identical * 10 > bothAccepted * 8, "only \(identical) of \(bothAccepted) documents decoded identically")
    }

    @Test("documents as frames: the envelope's payload decodes as Foundation decodes the same payload")
    func generatedEnvelopes() throws {
        var random = SeededGenerator(seed: Self.seed ^ 0xE4E)
        for index in 0..<Self.cases {
            let payload = random.document(depth: 3)
            let frame = Array(#"{"type":"T","payload":"#.utf8) + payload + Array("}".utf8)
            let envelope = try EnvelopeParser.parse(ByteBuffer(bytes: frame))
            let mine = try MessageCodec.decode(JSONValue.self, from: envelope.payload, syntaxChecked: true)
            let foundation = try JSONDecoder().decode(JSONValue.self, from: Data(payload))
            #expect(mine.agrees(with: foundation), "seed \(Self.seed), envelope \(index): \(mine) differs from \(foundation)")
        }
    }
}

/// Any JSON value, decoded through the Decoder protocols only, so each decoder's own choices
/// (which integer types a number fits, which of repeated keys counts, string escapes) show.
///
/// A number is decoded as each of Int64, UInt64 and Double separately: the decoders differ on
/// purpose in what they accept (PeerKit reads `9007199254740993.5` as no integer, Foundation
/// rounds it through Double), and `agrees(with:)` compares each type only where both accepted it.
enum JSONValue: Decodable, Equatable {
    case null
    case bool(Bool)
    /// The number as Int64, as UInt64, and as a Double's bit pattern (so -0.0 and 0.0 differ).
    case number(int: Int64?, unsigned: UInt64?, double: UInt64?)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Equal wherever both decoders accepted the same reading.
    func agrees(with other: JSONValue) -> Bool {
        func same<T: Equatable>(_ a: T?, _ b: T?) -> Bool { a == nil || b == nil || a == b }
        switch (self, other) {
        case let (.number(i1, u1, d1), .number(i2, u2, d2)):
            return same(i1, i2) && same(u1, u2) && same(d1, d2)
        case let (.array(a), .array(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.agrees(with: $1) }
        case let (.object(a), .object(b)):
            return a.keys == b.keys && a.allSatisfy { key, value in b[key].map(value.agrees) ?? false }
        default:
            return self == other
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: AnyKey.self) {
            var object: [String: JSONValue] = [:]
            for key in container.allKeys {
                object[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
            }
            self = .object(object)
        } else if var container = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !container.isAtEnd { array.append(try container.decode(JSONValue.self)) }
            self = .array(array)
        } else {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let bool = try? container.decode(Bool.self) {
                self = .bool(bool)
            } else if case let (int, unsigned, double) = (try? container.decode(Int64.self), try? container.decode(UInt64.self), try? container.decode(Double.self)),
                      int != nil || unsigned != nil || double != nil {
                self = .number(int: int, unsigned: unsigned, double: double?.bitPattern)
            } else {
                self = .string(try container.decode(String.self))
            }
        }
    }
}

/// SplitMix64: small, fast, and the same sequence everywhere for a seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }

    mutating func pick<T>(_ choices: [T]) -> T { choices[Int.random(in: 0..<choices.count, using: &self)] }

    mutating func string() -> String {
        let pools: [[Unicode.Scalar]] = [
            Array("abcXYZ019 _-".unicodeScalars),
            ["\"", "\\", "/", "\n", "\r", "\t", "\u{08}", "\u{0C}", "\u{00}", "\u{1F}", "\u{7F}"],
            ["é", "ß", "中", "😀", "\u{301}", "\u{FEFF}", "\u{2028}", "\u{10FFFF}", "\u{E000}", "\u{212A}"],
        ]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &self) {
            scalars.append(pick(pick(pools)))
        }
        return String(scalars)
    }

    mutating func double() -> Double {
        switch Int.random(in: 0..<6, using: &self) {
        case 0: return pick([0.0, -0.0, 1, -1, 0.1, 1e-300, 5e-324, .greatestFiniteMagnitude, -.leastNormalMagnitude, 9_007_199_254_740_993, 1e21, 123_456_789.125])
        case 1: return Double(Int.random(in: -1_000_000...1_000_000, using: &self))
        case 2: return Double.random(in: -1...1, using: &self)
        default:
            var bits: Double
            repeat { bits = Double(bitPattern: next()) } while !bits.isFinite
            return bits
        }
    }

    mutating func float() -> Float {
        var value: Float
        repeat { value = chance(50) ? Float(bitPattern: UInt32(truncatingIfNeeded: next())) : Float(double()) } while !value.isFinite
        return value
    }

    mutating func sample(depth: Int) -> JSONDifferentialTests.Sample {
        JSONDifferentialTests.Sample(
            string: string(),
            int: pick([Int.min, Int.max, 0, -1, Int(truncatingIfNeeded: next())]),
            int8: Int8(truncatingIfNeeded: next()),
            uint16: UInt16(truncatingIfNeeded: next()),
            int64: pick([Int64.min, Int64.max, 9_007_199_254_740_993, Int64(truncatingIfNeeded: next())]),
            uint64: pick([UInt64.max, 0, 18_446_744_073_709_551_557, next()]),
            double: double(),
            float: float(),
            bool: chance(50),
            optional: chance(50) ? string() : nil,
            numbers: (0..<Int.random(in: 0...5, using: &self)).map { _ in Int(truncatingIfNeeded: next()) >> Int.random(in: 0...63, using: &self) },
            map: Dictionary((0..<Int.random(in: 0...4, using: &self)).map { _ in (string(), double()) }, uniquingKeysWith: { first, _ in first }),
            kind: pick(JSONDifferentialTests.Kind.allCases),
            data: Data((0..<Int.random(in: 0...20, using: &self)).map { _ in UInt8(truncatingIfNeeded: next()) }),
            date: Date(timeIntervalSinceReferenceDate: pick([0, -1.5, 1e9, double()])),
            url: chance(50) ? URL(string: pick(["https://example.com/a?b=c&d=%20", "file:///tmp/x", "peer://a/b/c"])) : nil,
            children: depth > 0 ? (0..<Int.random(in: 0...2, using: &self)).map { _ in sample(depth: depth - 1) } : []
        )
    }

    mutating func whitespace() -> String { chance(80) ? "" : pick([" ", "\n", "\t", "\r\n ", "  "]) }

    mutating func number() -> String {
        let sign = chance(30) ? "-" : ""
        let integer = pick(["0", "1", "9", "42", "9007199254740993", "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616", "123456789012345678901234567890", String(next() >> Int.random(in: 0...63, using: &self))])
        let fraction = chance(25) ? "." + pick(["0", "5", "000", "25", "1000000000000000001"]) : ""
        let exponent = chance(20) ? pick(["e", "E"]) + pick(["", "+", "-"]) + String(Int.random(in: 0...40, using: &self)) : ""
        return sign + integer + fraction + exponent
    }

    mutating func escapedString() -> String {
        var text = "\""
        for _ in 0..<Int.random(in: 0...8, using: &self) {
            text += pick(["a", "Z", " ", "é", "😀", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0041", "\\u00e9", "\\uD83D\\uDE00", "\\u0000", "\\u2028", "e\\u0301", "\\u212A"])
        }
        return text + "\""
    }

    mutating func document(depth: Int) -> [UInt8] {
        func value(_ depth: Int) -> String {
            let kind = depth > 0 ? Int.random(in: 0..<8, using: &self) : Int.random(in: 0..<5, using: &self)
            switch kind {
            case 0: return pick(["null", "true", "false"])
            case 1, 2: return number()
            case 3, 4: return escapedString()
            case 5: return "[" + whitespace() + (0..<Int.random(in: 0...4, using: &self)).map { _ in whitespace() + value(depth - 1) + whitespace() }.joined(separator: ",") + "]"
            default:
                let keys = ["a", "b", "\\u0061", "key", "é", "e\\u0301", "\\u212A", "K", ""]
                return "{" + whitespace() + (0..<Int.random(in: 0...5, using: &self)).map { _ in
                    whitespace() + "\"" + pick(keys) + "\"" + whitespace() + ":" + whitespace() + value(depth - 1) + whitespace()
                }.joined(separator: ",") + "}"
            }
        }
        return Array((whitespace() + value(depth) + whitespace()).utf8)
    }

    /// A copy with a few bytes deleted, duplicated or replaced (often making it invalid).
    mutating func mutate(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...3, using: &self) where !bytes.isEmpty {
            let index = Int.random(in: 0..<bytes.count, using: &self)
            switch Int.random(in: 0..<3, using: &self) {
            case 0: bytes.remove(at: index)
            case 1: bytes.insert(bytes[index], at: index)
            default: bytes[index] = pick(Array("{}[],:\"\\0-.eE ".utf8) + [0xC3, 0xFF, 0x80])
            }
        }
        return bytes
    }
}
