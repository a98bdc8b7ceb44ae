import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// PayloadDecoder must decode exactly what JSONDecoder decodes, and refuse what it refuses.
@Suite("Payload decoder agrees with JSONDecoder")
struct PayloadDecoderTests {
    struct Everything: Codable, Equatable {
        enum Kind: String, Codable { case a, b }
        struct Inner: Codable, Equatable { var values: [Int]; var map: [String: Double]; var flag: Bool? }
        var string: String
        var int: Int
        var int8: Int8
        var uint64: UInt64
        var int64: Int64
        var double: Double
        var float: Float
        var bool: Bool
        var optional: String?
        var missing: Int?
        var kind: Kind
        var inner: Inner
        var list: [Inner]
        var nested: [[String]]
        var data: Data
        var date: Date
        var url: URL
        var uuid: UUID
        var decimal: Decimal
        var intKeys: [Int: String]
        var tuple: [String?]
    }

    static let sample = Everything(
        string: "héllo \"quoted\" \\ /slash\n\t\u{01} 😀",
        int: -42, int8: -128, uint64: .max, int64: .min, double: 0.1, float: 1.5, bool: true,
        optional: nil, missing: nil, kind: .b,
        inner: .init(values: [1, 2, 3], map: ["x": 2.5e-3, "y": -0.0], flag: false),
        list: [.init(values: [], map: [:], flag: nil)],
        nested: [["a"], [], ["b", "c"]],
        data: Data([0, 1, 2, 254, 255]), date: Date(timeIntervalSinceReferenceDate: 123.25),
        url: URL(string: "https://example.com/a?b=c")!, uuid: UUID(uuidString: "8C4E1C9B-0D0C-4A8B-9C1E-3F0A6D2B7E11")!,
        decimal: Decimal(string: "12.345")!, intKeys: [1: "one", 2: "two"], tuple: ["a", nil]
    )

    func both<T: Decodable & Equatable>(_ type: T.Type, _ json: String) throws -> (T, T) {
        let fast = try PayloadDecoder.decode(T.self, from: ByteBuffer(string: json))
        let foundation = try JSONDecoder().decode(T.self, from: Data(json.utf8))
        return (fast, foundation)
    }

    @Test("a value encoded by JSONEncoder decodes to the same value")
    func roundTrip() throws {
        let json = String(decoding: try JSONEncoder().encode(Self.sample), as: UTF8.self)
        let (fast, foundation) = try both(Everything.self, json)
        #expect(fast == Self.sample)
        #expect(fast == foundation)
    }

    @Test("whitespace, escapes, repeated keys and unknown keys are handled like JSONDecoder")
    func lenientInput() throws {
        struct Small: Codable, Equatable { var a: String; var b: [Int] }
        let json = " { \"x\" : {\"deep\":[1,{\"k\":null}]}, \"a\" : \"\\u0041\\u00e9\\ud83d\\ude00\" , \"b\":[ 1 , 2 ], \"\\u0062\":[3] } "
        let (fast, foundation) = try both(Small.self, json)
        #expect(fast == foundation)
        #expect(fast == Small(a: "Aé😀", b: [1, 2]))
    }

    @Test("whole numbers written with a fraction or exponent decode as integers", arguments: ["1.0", "1e2", "-0", "250"])
    func integralNumbers(text: String) throws {
        struct N: Codable, Equatable { var n: Int }
        let (fast, foundation) = try both(N.self, "{\"n\":\(text)}")
        #expect(fast == foundation)
    }

    @Test("bad payloads are refused, as JSONDecoder refuses them", arguments: [
        #"{"n":"1"}"#, #"{"n":1.5}"#, #"{"n":null}"#, #"{}"#, #"{"n":300}"#, #"[1]"#, #"{"n":1} x"#, #"{"n":01}"#, #"{"n":-}"#,
        #"{"n" 1}"#, "{\"n\":1", "", "nul",
    ])
    func refusals(json: String) {
        struct N: Codable { var n: UInt8 }
        #expect(throws: (any Error).self) { try PayloadDecoder.decode(N.self, from: ByteBuffer(string: json)) }
        #expect(throws: (any Error).self) { try JSONDecoder().decode(N.self, from: Data(json.utf8)) }
    }

    @Test("a trailing comma is refused (RFC 8259), although JSONDecoder lets it pass")
    func trailingComma() {
        struct N: Codable { var n: Int }
        #expect(throws: (any Error).self) { try PayloadDecoder.decode(N.self, from: ByteBuffer(string: #"{"n":1,}"#)) }
    }

    @Test("errors name the key and say what was wrong")
    func errors() {
        struct Item: Codable { var title: String; var count: Int }
        #expect(throws: PeerKitError.payloadDecodingFailed(type: "Item", reason: "the key \"count\" is missing from the payload")) {
            try MessageCodec.decode(Item.self, from: ByteBuffer(string: #"{"title":"x"}"#))
        }
        #expect(throws: PeerKitError.payloadDecodingFailed(type: "Item", reason: "\"count\" is not of type Int")) {
            try MessageCodec.decode(Item.self, from: ByteBuffer(string: #"{"title":"x","count":"3"}"#))
        }
        #expect(throws: PeerKitError.payloadDecodingFailed(type: "Item", reason: "\"title\" has no String value")) {
            try MessageCodec.decode(Item.self, from: ByteBuffer(string: #"{"title":null,"count":3}"#))
        }
    }

    /// Values whose errors come from deep in a payload: through arrays, dictionaries,
    /// single-value wrappers, `superDecoder`, and `init(from:)`s that throw with their own paths.
    struct Deep: Decodable {
        struct Leaf: Decodable {
            enum CodingKeys: String, CodingKey { case n }
            var n: Int
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                n = try container.decode(Int.self, forKey: .n)
                guard n >= 0 else { throw DecodingError.dataCorruptedError(forKey: .n, in: container, debugDescription: "negative") }
            }
        }
        struct Wrapper: Decodable {
            var leaf: Leaf
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                leaf = try container.decode(Leaf.self)
                guard leaf.n != 7 else { throw DecodingError.dataCorruptedError(in: container, debugDescription: "seven") }
            }
        }
        enum CodingKeys: String, CodingKey { case items, nested, base }
        var items: [Wrapper]
        var nested: [String: [Leaf]]
        var base: Leaf?
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            items = try container.decode([Wrapper].self, forKey: .items)
            nested = try container.decode([String: [Leaf]].self, forKey: .nested)
            base = container.contains(.base) ? try Leaf(from: container.superDecoder(forKey: .base)) : nil
        }
    }

    /// The coding path of the `DecodingError` that `body` throws, keys as text and indices as
    /// numbers; nil when it decodes.
    func errorPath(_ body: () throws -> Deep) -> [String]? {
        do {
            _ = try body()
            return nil
        } catch let error as DecodingError {
            let context: DecodingError.Context
            switch error {
            case let .typeMismatch(_, found), let .valueNotFound(_, found), let .keyNotFound(_, found): context = found
            case let .dataCorrupted(found): context = found
            @unknown default: return ["an unknown DecodingError"]
            }
            return context.codingPath.map { key in key.intValue.map { "[\($0)]" } ?? key.stringValue }
        } catch {
            return ["not a DecodingError: \(error)"]
        }
    }

    @Test("an error deep in a payload names the coding path JSONDecoder names", arguments: [
        #"{"items":[{"n":1},{"n":"x"}],"nested":{}}"#,
        #"{"items":[{"n":1},{"n":-1}],"nested":{}}"#,
        #"{"items":[{"n":1},{"n":7}],"nested":{}}"#,
        #"{"items":[{}],"nested":{}}"#,
        #"{"items":[],"nested":{"a":[{"n":1},{"m":1}]}}"#,
        #"{"items":[],"nested":{"a":[{"n":null}]}}"#,
        #"{"items":[],"nested":{"a":[{"n":-5}]}}"#,
        #"{"items":[],"nested":{"a":{"n":1}}}"#,
        #"{"items":[],"nested":{},"base":{"n":-2}}"#,
        #"{"items":[],"nested":{},"base":{"n":true}}"#,
    ])
    func errorPaths(json: String) {
        let ours = errorPath { try PayloadDecoder.decode(Deep.self, from: ByteBuffer(string: json)) }
        let foundation = errorPath { try JSONDecoder().decode(Deep.self, from: Data(json.utf8)) }
        #expect(ours != nil)
        #expect(ours == foundation)
    }

    @Test("a string that is not valid UTF-8 is refused")
    func invalidUTF8() {
        struct S: Codable { var s: String }
        var buffer = ByteBuffer(string: #"{"s":""#)
        buffer.writeBytes([0xC3, 0x28])
        buffer.writeString(#""}"#)
        #expect(throws: (any Error).self) { try PayloadDecoder.decode(S.self, from: buffer) }
    }

    @Test("random JSON-ish bytes decode exactly when JSONDecoder decodes them, to the same value")
    func fuzz() throws {
        struct Shape: Codable, Equatable { var a: [Int]?; var b: String?; var c: [String: Double]? }
        let seed = ProcessInfo.processInfo.environment["PEERKIT_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0 ... .max)
        print("PayloadDecoderTests.fuzz: seed \(seed) (set PEERKIT_FUZZ_SEED=\(seed) to run these inputs again)")
        var generator = SeededGenerator(seed: seed)
        let alphabet = Array(#"{}[]",:\ tuefalsnr0123456789.-eEabc"#.utf8)
        let valid = [#"{"a":[1,-2,30],"b":"x\n","c":{"k":1.5e2}}"#, #"{"b":null,"c":{}}"#, #"{}"#, #"{"a":[]}"#].map { Array($0.utf8) }
        var decoded = 0, refused = 0
        for index in 0..<5000 {
            var bytes: [UInt8]
            if index.isMultiple(of: 2) {
                bytes = (0..<Int.random(in: 0..<40, using: &generator)).map { _ in generator.pick(alphabet) }
            } else {
                // A valid payload with a byte replaced, inserted or removed.
                bytes = generator.pick(valid)
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[at] = generator.pick(alphabet)
                case 1: bytes.insert(generator.pick(alphabet), at: at)
                default: bytes.remove(at: at)
                }
            }
            let input = "seed \(seed), input \(index): \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            let mine = try? PayloadDecoder.decode(Shape.self, from: ByteBuffer(bytes: bytes))
            let foundation = try? JSONDecoder().decode(Shape.self, from: Data(bytes))
            // The one difference on purpose: a trailing comma, which JSONDecoder lets pass (see above).
            let trailingComma = String(decoding: bytes, as: UTF8.self).contains(/,[ \t\n\r]*[}\]]/)
            if !(mine == nil && foundation != nil && trailingComma) {
                #expect(mine == foundation, "\(input): PayloadDecoder gave \(String(describing: mine)), JSONDecoder \(String(describing: foundation))")
            }
            if mine == nil { refused += 1 } else { decoded += 1 }
        }
        #expect(decoded > 100 && refused > 100, "seed \(seed): \(decoded) decoded, \(refused) refused")
    }
}
