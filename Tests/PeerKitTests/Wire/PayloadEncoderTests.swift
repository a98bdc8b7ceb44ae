import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// PayloadEncoder's output must decode, with JSONDecoder, to the value that was encoded.
@Suite("Payload encoder agrees with JSONEncoder")
struct PayloadEncoderTests {
    func text<T: Encodable>(_ value: T) throws -> String {
        String(buffer: try PayloadEncoder.encode(value))
    }

    @Test("a value of every kind round-trips through JSONDecoder and through PayloadDecoder")
    func roundTrip() throws {
        let sample = PayloadDecoderTests.sample
        let buffer = try PayloadEncoder.encode(sample)
        #expect(try JSONDecoder().decode(PayloadDecoderTests.Everything.self, from: Data(buffer.readableBytesView)) == sample)
        #expect(try PayloadDecoder.decode(PayloadDecoderTests.Everything.self, from: buffer) == sample)
    }

    @Test("simple values are written compactly, in declaration order, without escaping '/'")
    func compact() throws {
        struct Item: Codable { var title: String; var count: Int; var ratio: Double; var done: Bool; var note: String? }
        #expect(try text(Item(title: "a/b \"c\"", count: -3, ratio: 2, done: true, note: nil)) == #"{"title":"a/b \"c\"","count":-3,"ratio":2,"done":true}"#)
        struct Empty: Codable {}
        #expect(try text(Empty()) == "{}")
        #expect(try text([1, 2, 3]) == "[1,2,3]")
        #expect(try text(["k": [String?.none]]) == #"{"k":[null]}"#)
        #expect(try text("top") == #""top""#)
        #expect(try text(Data([1, 2, 3])) == #""AQID""#)
    }

    @Test("an encode(to:) that returns to a container it left falls back to JSONEncoder and stays correct")
    func outOfOrderFallsBack() throws {
        struct Tricky: Encodable {
            enum Keys: String, CodingKey { case a, b, c }
            func encode(to encoder: any Encoder) throws {
                var outer = encoder.container(keyedBy: Keys.self)
                var nested = outer.nestedContainer(keyedBy: Keys.self, forKey: .a)
                try outer.encode(1, forKey: .b)
                try nested.encode(2, forKey: .c) // back into a container that the line above closed
            }
        }
        let decoded = try JSONSerialization.jsonObject(with: Data(try PayloadEncoder.encode(Tricky()).readableBytesView)) as? [String: Any]
        #expect(decoded?["b"] as? Int == 1)
        #expect((decoded?["a"] as? [String: Any])?["c"] as? Int == 2)
    }

    @Test("a class that encodes its superclass through superEncoder falls back and stays correct")
    func superEncoder() throws {
        let decoded = try JSONSerialization.jsonObject(with: Data(try PayloadEncoder.encode(SuperEncodingDerived()).readableBytesView)) as? [String: Any]
        #expect(decoded?["extra"] as? Int == 2)
        #expect((decoded?["super"] as? [String: Any])?["base"] as? Int == 1)
    }

    @Test("non-finite numbers are refused, as JSONEncoder refuses them, naming where they are")
    func nonFinite() {
        #expect(throws: EncodingError.self) { try PayloadEncoder.encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try PayloadEncoder.encode(["x": Float.infinity]) }
        struct Reading: Encodable { var values: [Double]; var peak: Float }
        // Written in place (no slot of their own), the error still carries the member's path.
        for (value, path) in [(Reading(values: [1, 2, .infinity], peak: 1), ["values", "Index 2"]),
                              (Reading(values: [], peak: .nan), ["peak"])] {
            do {
                _ = try PayloadEncoder.encode(value)
                Issue.record("\(value) encoded")
            } catch let EncodingError.invalidValue(_, context) {
                #expect(context.codingPath.map(\.stringValue) == path)
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    @Test("strings with every kind of character round-trip", arguments: ["", "plain", "\u{0}\u{1F}\u{7F}", "\"\\/\n\r\t\u{08}\u{0C}", "é😀中"])
    func strings(value: String) throws {
        #expect(try JSONDecoder().decode([String].self, from: Data(try PayloadEncoder.encode([value]).readableBytesView)) == [value])
    }
}

/// A class that encodes its superclass through `superEncoder()`, which makes the streaming
/// encoder give up and fall back to `JSONEncoder`: `{"extra":2,"super":{"base":1}}`.
class SuperEncodingBase: Encodable { var base = 1 }

final class SuperEncodingDerived: SuperEncodingBase {
    var extra = 2
    enum Keys: String, CodingKey { case extra }
    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(extra, forKey: .extra)
        try super.encode(to: container.superEncoder())
    }
}
