import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// The codec defects of issue 10 (item 7): partial output after a throwing encode, repeated keys,
/// integers above 2^53, and invalid UTF-8 where the decoder did not look.
@Suite("JSON codec: throwing encodes, repeated keys, big integers, UTF-8")
struct JSONCodecCorrectnessTests: JSONComparing {
    typealias Key = AnyNameKey

    // MARK: Throwing encodes

    struct SkipsNaN: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try? container.encode(Double.nan, forKey: Key("bad"))
            try container.encode(1, forKey: Key("good"))
            try? container.encode([1.0, .infinity], forKey: Key("badList"))
            try? container.encode(Inner(values: [1, .nan]), forKey: Key("badInner"))
            var list = container.nestedUnkeyedContainer(forKey: Key("list"))
            try list.encode(1)
            try? list.encode(Float.nan)
            try? list.encode(Inner(values: [.infinity]))
            try list.encode(2)
        }
    }

    struct Inner: Encodable {
        var values: [Double]
    }

    struct SkipsScalarNaN: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try? container.encode(Double.nan, forKey: Key("bad"))
            try container.encode(1, forKey: Key("good"))
            var list = container.nestedUnkeyedContainer(forKey: Key("list"))
            try list.encode(1)
            try? list.encode(Float.nan)
            try list.encode(2)
        }
    }

    @Test("a member or element whose encoding throws leaves no trace, so try? around it writes valid JSON like JSONEncoder")
    func throwingEncodeLeavesNothing() throws {
        let json = try peerKit(SkipsScalarNaN())
        #expect(json == #"{"good":1,"list":[1,2]}"#)
        #expect(try tree(json) == tree(foundation(SkipsScalarNaN())))
        // Nested values that throw half-way: JSONEncoder itself traps on this (it reuses the
        // failed nested encoder), so the expected text is spelled out.
        #expect(try peerKit(SkipsNaN()) == #"{"good":1,"list":[1,2]}"#)
    }

    struct SwallowsSuper: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode("x", forKey: Key("name"))
            var superContainer = container.superEncoder().container(keyedBy: Key.self)
            try? superContainer.encode(1, forKey: Key("inherited"))
        }
    }

    @Test("giving up on streaming is remembered even when encode(to:) swallows the error with try?")
    func swallowedFallbackStillFallsBack() throws {
        let json = try peerKit(SwallowsSuper())
        #expect(try tree(json) == tree(foundation(SwallowsSuper())))
        #expect(json.contains("inherited"))
    }

    // MARK: Repeated keys

    struct Repeats: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(1, forKey: Key("a"))
            try container.encode("b", forKey: Key("b"))
            try container.encode(2, forKey: Key("a"))
        }
    }

    struct RepeatsNested: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            var first = container.nestedContainer(keyedBy: Key.self, forKey: Key("n"))
            try first.encode(1, forKey: Key("x"))
            try container.encode(5, forKey: Key("m"))
            var second = container.nestedContainer(keyedBy: Key.self, forKey: Key("n"))
            try second.encode(2, forKey: Key("y"))
        }
    }

    @Test("a key encoded twice is written once with JSONEncoder's result (the last value; nested containers merged)")
    func repeatedKeys() throws {
        let repeats = try peerKit(Repeats())
        #expect(try tree(repeats) == tree(#"{"a":2,"b":"b"}"#))
        #expect(repeats.components(separatedBy: "\"a\"").count == 2)
        #expect(try tree(peerKit(RepeatsNested())) == tree(foundation(RepeatsNested())))
        #expect(try tree(peerKit(RepeatsNested())) == tree(#"{"m":5,"n":{"x":1,"y":2}}"#))
    }

    struct RepeatsAfterFailure: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try? container.encode(Double.nan, forKey: Key("a"))
            try container.encode(3, forKey: Key("a"))
        }
    }

    @Test("a key whose first encoding threw may be encoded again, and is written once")
    func keyAfterFailure() throws {
        #expect(try peerKit(RepeatsAfterFailure()) == #"{"a":3}"#)
    }

    @Test("a dictionary of many keys encodes each once, as JSONEncoder does")
    func manyKeys() throws {
        let dictionary = Dictionary(uniqueKeysWithValues: (0..<5_000).map { ("k\($0)", $0) })
        let json = try peerKit(dictionary)
        #expect(try JSONDecoder().decode([String: Int].self, from: Data(json.utf8)) == dictionary)
        #expect(try tree(json) == tree(foundation(dictionary)))
    }

    @Test("repeated member names in a document: the first counts, and allKeys lists each once, as in JSONDecoder")
    func repeatedNamesDecode() throws {
        let json = #"{"a":1,"b":2,"a":3,"\u00e9":4,"e\u0301":5}"#
        let ours = try PayloadDecoder.decode([String: Int].self, from: ByteBuffer(string: json))
        let theirs = try JSONDecoder().decode([String: Int].self, from: Data(json.utf8))
        #expect(ours == theirs)
        #expect(ours == ["a": 1, "b": 2, "é": 4])
    }

    @Test("repeated envelope keys: the first type, id, replyTo and payload count")
    func repeatedEnvelopeKeys() throws {
        let envelope = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"A","id":"1","payload":[1],"type":"B","id":"2","payload":[2],"replyTo":"x","replyTo":"y"}"#))
        #expect(envelope.type == "A")
        #expect(envelope.id == "1")
        #expect(envelope.replyTo == "x")
        #expect(String(buffer: envelope.payload) == "[1]")
    }

    // MARK: Integers above 2^53

    struct Wide: Codable, Equatable {
        var signed: Int64
        var unsigned: UInt64
        var int: Int
    }

    @Test("Int64 and UInt64 round-trip exactly, above 2^53 too", arguments: [
        Wide(signed: .max, unsigned: .max, int: .min),
        Wide(signed: .min, unsigned: 9_007_199_254_740_993, int: 9_007_199_254_740_993),
        Wide(signed: -9_007_199_254_740_993, unsigned: 18_446_744_073_709_551_557, int: .max),
    ])
    func bigIntegersRoundTrip(value: Wide) throws {
        let encoded = try PayloadEncoder.encode(value)
        #expect(try PayloadDecoder.decode(Wide.self, from: encoded) == value)
        #expect(try JSONDecoder().decode(Wide.self, from: Data(String(buffer: encoded).utf8)) == value)
    }

    @Test("a number with a fraction or exponent decodes as an integer exactly when it is a whole number that fits", arguments: [
        ("9007199254740993.0", Int64(9_007_199_254_740_993) as Int64?),
        ("9007199254740993e0", 9_007_199_254_740_993),
        ("90071992547409930e-1", 9_007_199_254_740_993),
        ("-9223372036854775808.000", .min),
        ("12.50e1", 125),
        ("1e18", 1_000_000_000_000_000_000),
        ("0.0e99999999999999999999", 0),
        ("-0.0", 0),
        ("1.5", nil),
        ("1e-400", nil),
        ("9223372036854775808.0", nil),
        ("1e19", nil),
        ("1e99999999999999999999", nil),
    ])
    func integerFromDecimalText(text: String, expected: Int64?) throws {
        let decoded = try? PayloadDecoder.decode(Int64.self, from: ByteBuffer(string: text))
        #expect(decoded == expected)
    }

    @Test("UInt64.max written as 18446744073709551615.0 decodes exactly, not through Double")
    func unsignedWithFraction() throws {
        #expect(try PayloadDecoder.decode(UInt64.self, from: ByteBuffer(string: "18446744073709551615.0")) == .max)
        #expect(try PayloadDecoder.decode([UInt64].self, from: ByteBuffer(string: "[18446744073709551614e0]")) == [.max - 1])
    }

    // MARK: UTF-8

    func envelopeError(_ bytes: [UInt8]) -> WireError? {
        do {
            _ = try EnvelopeParser.parse(ByteBuffer(bytes: bytes))
            return nil
        } catch {
            return error
        }
    }

    /// `{"type":"T","<key>":"<value>","payload":{"skipped":["<deep>"]}}` with raw bytes spliced in.
    func frame(key: [UInt8] = Array("k".utf8), value: [UInt8] = Array("v".utf8), deep: [UInt8] = Array("d".utf8)) -> [UInt8] {
        Array(#"{"type":"T",""#.utf8) + key + Array(#"":""#.utf8) + value + Array(#"","payload":{"skipped":[""#.utf8) + deep + Array(#""]}}"#.utf8)
    }

    static let invalidSequences: [[UInt8]] = [
        [0xFF],                     // never valid
        [0x80],                     // a continuation byte alone
        [0xC3],                     // a lead byte without its continuation
        [0xC0, 0xAF],               // overlong '/'
        [0xE0, 0x80, 0xAF],         // overlong, three bytes
        [0xED, 0xA0, 0x80],         // a UTF-16 surrogate (U+D800)
        [0xF4, 0x90, 0x80, 0x80],   // above U+10FFFF
        [0xF0, 0x9F, 0x98],         // a four-byte sequence cut short
        [0xE2, 0x28, 0xA1],         // a bad continuation byte
    ]

    @Test("invalid UTF-8 in a member name, an ignored value or a skipped nested value is refused with a sentence", arguments: invalidSequences)
    func invalidUTF8Refused(sequence: [UInt8]) throws {
        for bytes in [frame(key: sequence), frame(value: sequence), frame(deep: sequence), frame(deep: Array("ok ".utf8) + sequence + Array(" ok".utf8))] {
            let error = try #require(envelopeError(bytes))
            guard case let .malformedEnvelope(reason) = error else {
                Issue.record("expected malformedEnvelope, got \(error)")
                continue
            }
            #expect(reason.contains("not valid UTF-8"), "\(reason)")
            #expect(PeerKitError.malformedFrame(reason: error.reason, peer: "peer-1").description.contains("not valid UTF-8"))
        }
        // An unchecked payload is refused the same way.
        #expect(throws: DecodingError.self) {
            try PayloadDecoder.decode([String].self, from: ByteBuffer(bytes: Array(#"[""#.utf8) + sequence + Array(#""]"#.utf8)))
        }
    }

    @Test("valid UTF-8 of every length is accepted anywhere", arguments: ["é", "中", "😀", "\u{10FFFF}", "\u{7F}", "a\u{80}b"])
    func validUTF8Accepted(text: String) throws {
        let bytes = Array(text.utf8)
        let envelope = try EnvelopeParser.parse(ByteBuffer(bytes: frame(key: bytes, value: bytes, deep: bytes)))
        #expect(envelope.type == "T")
    }
}
