import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

/// The encoder's and the envelope parser's fast paths, at their boundaries: an object's first
/// keys kept in place, then in the shared array, then hashed (the check for repeated keys must
/// find a repeat in every tier and after every restore); integers written digit by digit; strings
/// written with their punctuation in one write; envelope names compared byte by byte.
@Suite("Payload encoder and envelope parser fast paths")
struct PayloadEncoderFastPathTests: JSONComparing {
    typealias Key = AnyNameKey

    /// Writes `count` keys `k0`, `k1`, … and then `k<repeated>` again.
    struct RepeatsOneKey: Encodable {
        var count: Int
        var repeated: Int

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for index in 0..<count { try container.encode(index, forKey: Key("k\(index)")) }
            try container.encode(-1, forKey: Key("k\(repeated)"))
        }
    }

    @Test("a repeated key is found whichever tier holds it: in place, in the shared array, or hashed")
    func repeatsInEveryTier() throws {
        for count in 1...12 {
            for repeated in 0..<count {
                let value = RepeatsOneKey(count: count, repeated: repeated)
                let json = try peerKit(value)
                #expect(json.components(separatedBy: "\"k\(repeated)\"").count == 2, "\(count) keys, k\(repeated) again: \(json)")
                #expect(try tree(json) == tree(foundation(value)), "\(count) keys, k\(repeated) again")
            }
        }
    }

    /// Writes `count` keys, of which the one at `failing` throws first and is then written
    /// again; with `repeatAtEnd`, writes that key once more at the end (a repeat, so the value is
    /// encoded again by `JSONEncoder`, which traps on a nested value that throws half-way: that
    /// case throws from a scalar only).
    struct FailsThenRetries: Encodable {
        var count: Int
        var failing: Int
        var repeatAtEnd: Bool

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for index in 0..<count {
                if index == failing {
                    try? container.encode(Double.nan, forKey: Key("k\(index)"))
                    if !repeatAtEnd { try? container.encode([1, Double.infinity], forKey: Key("k\(index)")) }
                }
                try container.encode(index, forKey: Key("k\(index)"))
            }
            if repeatAtEnd { try container.encode(-1, forKey: Key("k\(failing)")) }
        }
    }

    @Test("a member that throws is taken back at every position, its key may be written again, and repeats are still found")
    func restoreInEveryTier() throws {
        for count in 1...12 {
            for failing in 0..<count {
                let streamed = try peerKit(FailsThenRetries(count: count, failing: failing, repeatAtEnd: false))
                #expect(streamed == "{" + (0..<count).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}")
                let json = try peerKit(FailsThenRetries(count: count, failing: failing, repeatAtEnd: true))
                let written = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Int]
                #expect(written?.count == count, "\(count) keys, k\(failing) failing: \(json)")
                #expect(written?["k\(failing)"] == -1, "\(count) keys, k\(failing) failing: \(json)")
                #expect(json.components(separatedBy: "\"k\(failing)\"").count == 2, "\(count) keys, k\(failing) failing: \(json)")
            }
        }
    }

    /// An object with `outerBefore` keys, a nested object with `inner` keys (named like the
    /// outer ones), then `outerAfter` more outer keys.
    struct Nested: Encodable {
        var outerBefore: Int
        var inner: Int
        var outerAfter: Int

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for index in 0..<outerBefore { try container.encode(index, forKey: Key("o\(index)")) }
            var nested = container.nestedContainer(keyedBy: Key.self, forKey: Key("nested"))
            for index in 0..<inner { try nested.encode(index, forKey: Key("o\(index)")) }
            var list = container.nestedUnkeyedContainer(forKey: Key("list"))
            try list.encode(1)
            var element = list.nestedContainer(keyedBy: Key.self)
            for index in 0..<inner { try element.encode(index, forKey: Key("o\(index)")) }
            for index in outerBefore..<(outerBefore + outerAfter) { try container.encode(index, forKey: Key("o\(index)")) }
        }
    }

    @Test("keys of nested objects are theirs alone, whatever tier the outer object's keys are in")
    func nestedKeys() throws {
        for outerBefore in [0, 1, 3, 4, 5, 8, 9, 12] {
            for inner in [0, 1, 4, 5, 9] {
                for outerAfter in [0, 1, 5] {
                    let value = Nested(outerBefore: outerBefore, inner: inner, outerAfter: outerAfter)
                    #expect(try tree(peerKit(value)) == tree(foundation(value)))
                }
            }
        }
    }

    struct Integers: Codable, Equatable {
        var int8: [Int8] = [.min, -1, 0, 9, 10, .max]
        var int16: [Int16] = [.min, -10, 99, 100, .max]
        var int32: [Int32] = [.min, -999, 1_000, .max]
        var int64: [Int64] = [.min, -9_999, 10_000, .max]
        var int: [Int] = [.min, -1, 0, 1, 1_234_567, .max]
        var uint8: [UInt8] = [0, 9, 10, .max]
        var uint16: [UInt16] = [0, 99, 100, .max]
        var uint32: [UInt32] = [0, 999, 1_000, .max]
        var uint64: [UInt64] = [0, 9_999_999_999, 10_000_000_000, .max]
        var uint: [UInt] = [0, 1, .max]
        var memberMin: Int64 = .min
        var memberMax: UInt64 = .max
        var memberZero: Int = 0
        var memberNegative: Int16 = -7
    }

    @Test("integers of every width and sign, as members and as elements, are written as JSONEncoder writes them")
    func integers() throws {
        // Arrays and one-member objects, whose order JSONEncoder keeps: the same text exactly.
        let values = Integers()
        #expect(try peerKit(values.int8) == foundation(values.int8))
        #expect(try peerKit(values.int16) == foundation(values.int16))
        #expect(try peerKit(values.int32) == foundation(values.int32))
        #expect(try peerKit(values.int64) == foundation(values.int64))
        #expect(try peerKit(values.int) == foundation(values.int))
        #expect(try peerKit(values.uint8) == foundation(values.uint8))
        #expect(try peerKit(values.uint16) == foundation(values.uint16))
        #expect(try peerKit(values.uint32) == foundation(values.uint32))
        #expect(try peerKit(values.uint64) == foundation(values.uint64))
        #expect(try peerKit(values.uint) == foundation(values.uint))
        #expect(try peerKit(["m": values.memberMin]) == foundation(["m": values.memberMin]))
        #expect(try peerKit(["m": values.memberMax]) == foundation(["m": values.memberMax]))
        // The whole value, members of every width (JSONEncoder's member order is its own).
        #expect(try tree(peerKit(values)) == tree(foundation(values)))
        #expect(try PayloadDecoder.decode(Integers.self, from: PayloadEncoder.encode(Integers())) == Integers())
        for value in [Int.min, Int.min + 1, -100, -10, -9, -1, 0, 1, 9, 10, 99, 100, Int.max - 1, Int.max] {
            #expect(try peerKit(value) == String(value))
            #expect(try peerKit(["k": value]) == #"{"k":\#(value)}"#)
        }
    }

    @Test("member names and string values that need escaping are written as JSONEncoder writes them", arguments: ["", "a", "\"", "a\"b", "\\", "\n", "\u{1}", "é", "😀x\u{7F}", String(repeating: "y", count: 40) + "\t"])
    func escapedNames(_ text: String) throws {
        let value = [text: text]
        #expect(try peerKit(value) == foundation(value).replacingOccurrences(of: "\\/", with: "/"))
        #expect(try peerKit([text, text]) == foundation([text, text]))
    }

    @Test("the envelope head is written as before, with and without id, replyTo and group")
    func envelopeHead() throws {
        let payload = ByteBuffer(string: "{}")
        let plain = EnvelopeEncoder.frame(type: "T\"é", payload: payload.readableBytesView)
        #expect(String(buffer: plain.getSlice(at: 4, length: plain.readableBytes - 4) ?? ByteBuffer()) == #"{"type":"T\"é","payload":{}}"#)
        let full = EnvelopeEncoder.frame(type: "T", id: "i\n", replyTo: "r", group: "g", payload: payload.readableBytesView)
        #expect(String(buffer: full.getSlice(at: 4, length: full.readableBytes - 4) ?? ByteBuffer()) == #"{"type":"T","id":"i\n","replyTo":"r","group":"g","payload":{}}"#)
    }

    @Test("envelope names with escapes still name the envelope's keys; other names of the same lengths are ignored")
    func envelopeNames() throws {
        let envelope = try EnvelopeParser.parse(ByteBuffer(string: #"{"typo":"X","i\u0064":"1","\u0074ype":"A","ix":"2","replyT0":"3","grouP":"4","r\u0065plyTo":"r","gr\u006fup":"g","p\u0061yload":[1],"payload":[2]}"#))
        #expect(envelope.type == "A")
        #expect(envelope.id == "1")
        #expect(envelope.replyTo == "r")
        #expect(envelope.group == "g")
        #expect(String(buffer: envelope.payload) == "[1]")
    }

    @Test("messages of many sizes, one after another, are framed with the right length and decode back")
    func frameSizeHint() throws {
        struct Text: Codable, Equatable { var text: String }
        for size in [0, 10, 100, 120, 200, 1_000, 5_000, 3, 100] {
            let value = Text(text: String(repeating: "z", count: size))
            let frame = try MessageCodec.encode(value).frame()
            let body = try #require(frame.getSlice(at: 4, length: frame.readableBytes - 4))
            #expect(frame.getInteger(at: 0, as: UInt32.self) == UInt32(body.readableBytes))
            let envelope = try EnvelopeParser.parse(body)
            #expect(try MessageCodec.decode(Text.self, from: envelope) == value)
        }
    }
}
