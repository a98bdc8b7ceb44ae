import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// Decoding must cost time linear in the payload, whatever its shape: a peer's one frame must not
/// freeze the receiver. The tests count the decoder's elementary steps (bytes walked, keys compared
/// or hashed; see `JSONDocument.work`) instead of timing it, so they cannot flake on a loaded machine.
/// The bound, a few steps per payload byte, is far below what the quadratic lookups did
/// (n²/2 key comparisons: 800 million for 40,000 keys) and the per-level re-walking of nested
/// containers (size × depth).
@Suite("JSON decoding is linear in the payload")
struct JSONLinearDecodingTests {
    /// Steps per payload byte allowed; linear decoding stays well under it.
    static let stepsPerByte = 16

    func decode<T: Decodable>(_ type: T.Type, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (value: T, work: Int) {
        let result = try PayloadDecoder.decodeCountingWork(T.self, from: ByteBuffer(string: json))
        let bytes = json.utf8.count
        #expect(result.work <= Self.stepsPerByte * bytes, "decoding \(bytes) bytes took \(result.work) steps, more than \(Self.stepsPerByte) per byte", sourceLocation: sourceLocation)
        return result
    }

    static func object(keys: Int, escaped: Bool = false) -> String {
        var json = "{"
        for index in 0..<keys {
            if index > 0 { json += "," }
            json += escaped ? "\"k\\u0065y\\n\(index)\":\(index)" : "\"key\(index)\":\(index)"
        }
        return json + "}"
    }

    @Test("a [String: Int] of 60,000 keys (about 1 MB) decodes in linear work, equal to JSONDecoder's", arguments: [false, true])
    func wideDictionary(escaped: Bool) throws {
        let json = Self.object(keys: 60_000, escaped: escaped)
        let (value, _) = try decode([String: Int].self, json)
        #expect(value.count == 60_000)
        #expect(value == (try JSONDecoder().decode([String: Int].self, from: Data(json.utf8))))
    }

    @Test("work grows with the number of keys, not with its square: 40,000 keys cost at most 5 times 10,000 keys")
    func workRatio() throws {
        let small = try decode([String: Int].self, Self.object(keys: 10_000)).work
        let large = try decode([String: Int].self, Self.object(keys: 40_000)).work
        #expect(large <= 5 * small, "10,000 keys took \(small) steps and 40,000 keys \(large)")
    }

    struct Few: Decodable, Equatable {
        var key7: Int
        var key39999: Int
        var missing: Int?
    }

    @Test("a struct's few keys are found in an object with 40,000 members (plain and escaped) in linear work", arguments: [false, true])
    func fewKeysInWideObject(escaped: Bool) throws {
        let json = Self.object(keys: 40_000, escaped: escaped)
        if escaped {
            struct Escaped: Decodable {
                var value: Int
                enum CodingKeys: String, CodingKey { case value = "key\n39999" }
            }
            #expect(try decode(Escaped.self, json).value.value == 39_999)
        } else {
            #expect(try decode(Few.self, json).value == Few(key7: 7, key39999: 39_999, missing: nil))
        }
    }

    /// A value `depth` arrays deep around one array of `width` numbers.
    indirect enum Nested: Decodable, Equatable {
        case leaf([Int])
        case node(Nested)

        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            if container.count == 1, let inner = try? container.decode(Nested.self) {
                self = .node(inner)
                return
            }
            self = .leaf(try decoder.singleValueContainer().decode([Int].self))
        }

        var depth: Int {
            switch self {
            case .leaf: 0
            case let .node(inner): inner.depth + 1
            }
        }
    }

    @Test("a deeply nested value costs the same per byte whatever its depth", arguments: [10, 200, 500])
    func deepNesting(depth: Int) throws {
        let numbers = Array(repeating: "12345", count: 50_000).joined(separator: ",")
        let json = String(repeating: "[", count: depth) + "[" + numbers + "]" + String(repeating: "]", count: depth)
        let (value, _) = try decode(Nested.self, json)
        #expect(value.depth == depth)
    }

    struct Tree: Decodable {
        var name: String
        var children: [String: Tree]
    }

    @Test("nested keyed containers, 250 levels of objects with wide members, decode in linear work")
    func nestedKeyed() throws {
        var json = #"{"name":"leaf","children":{}}"#
        let padding = (0..<100).map { "\"pad\($0)\":[1,2,3]" }.joined(separator: ",")
        for level in 0..<250 {
            json = "{\(padding),\"name\":\"n\(level)\",\"children\":{\"c\":\(json)}}"
        }
        var tree = try decode(Tree.self, json).value
        var levels = 0
        while let child = tree.children["c"] {
            tree = child
            levels += 1
        }
        #expect(levels == 250)
    }

    final class Base: Decodable {
        var values: [Int]
        enum CodingKeys: CodingKey { case values }
        required init(from decoder: any Decoder) throws {
            values = try decoder.container(keyedBy: CodingKeys.self).decode([Int].self, forKey: .values)
        }
    }

    struct ViaSuper: Decodable {
        var count: Int
        enum CodingKeys: CodingKey { case list }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let base = try Base(from: container.superDecoder())
            var list = try container.nestedUnkeyedContainer(forKey: .list)
            var count = base.values.count
            while !list.isAtEnd {
                let element = try list.superDecoder()
                count += try [Int](from: element).count
            }
            self.count = count
        }
    }

    @Test("superDecoder and unkeyed paths over 40,000 elements decode in linear work")
    func superAndUnkeyed() throws {
        let values = (0..<40_000).map(String.init).joined(separator: ",")
        let lists = (0..<10_000).map { "[\($0),1,2,3]" }.joined(separator: ",")
        let json = #"{"super":{"values":[\#(values)]},"list":[\#(lists)]}"#
        #expect(try decode(ViaSuper.self, json).value.count == 40_000 + 40_000)
    }
}
