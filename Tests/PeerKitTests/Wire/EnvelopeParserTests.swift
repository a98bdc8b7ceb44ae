import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

@Suite("Envelope parsing")
struct EnvelopeParserTests {
    private func parse(_ json: String) throws -> Envelope {
        try EnvelopeParser.parse(ByteBuffer(string: json))
    }

    private func parseError(_ bytes: [UInt8]) -> WireError? {
        do {
            _ = try EnvelopeParser.parse(ByteBuffer(bytes: bytes))
            return nil
        } catch {
            return error
        }
    }

    @Test("an envelope's type, id, replyTo and raw payload are read")
    func readsEveryKey() throws {
        let envelope = try parse(#"{"type":"AddItemCommand","id":"7","replyTo":"3","payload":{"title":"Milk","tags":[1,2.5e3,true,null]}}"#)
        #expect(envelope.type == "AddItemCommand")
        #expect(envelope.id == "7")
        #expect(envelope.replyTo == "3")
        #expect(String(buffer: envelope.payload) == #"{"title":"Milk","tags":[1,2.5e3,true,null]}"#)
    }

    @Test("the payload's long strings, and only they, are handed on with offsets into the payload, and decode as JSONDecoder decodes them")
    func longStringEndsHandedOn() throws {
        struct Doc: Codable, Equatable { var a: String; var b: String; var c: [String]; var d: Data }
        let long = String(repeating: "x", count: 300), escaped = String(repeating: "\\n\\u00e9", count: 60)
        let json = #"{"type":"Doc","id":"\#(long)","payload":{"a":"\#(long)","b":"short","c":["\#(escaped)","é\#(long)"],"d":"\#(Data(repeating: 7, count: 300).base64EncodedString())"},"z":"\#(long)"}"#
        let envelope = try parse(json)
        let payload = Array(envelope.payload.readableBytesView)
        let ends = envelope.payloadStringEnds
        // a, both strings of c, and d are long; b, the id and z are not in the payload or not long.
        #expect(ends.count == 4)
        for (start, end) in ends {
            #expect(payload[start] == UInt8(ascii: "\""))
            #expect(payload[end - 1] == UInt8(ascii: "\""))
            #expect(end - start >= LongStringEnds.minimumLength)
            #expect(try payload.withUnsafeBytes { try JSONReader(bytes: $0).stringEnd(at: start) } == end)
        }
        let expected = try JSONDecoder().decode(Doc.self, from: Data(payload))
        #expect(try envelope.decodePayload(Doc.self) == expected)
        #expect(try MessageCodec.decode(Doc.self, from: envelope) == expected)
    }

    @Test("keys may come in any order, with whitespace, and unknown keys are ignored")
    func keyOrderAndUnknownKeys() throws {
        let envelope = try parse(" {\n \"payload\" : [ ] ,\"extra\":{\"deep\":[{}]}, \"type\":\"X\"\t} ")
        #expect(envelope.type == "X")
        #expect(envelope.id == nil)
        #expect(String(buffer: envelope.payload) == "[ ]")
    }

    @Test("escapes in the type are decoded")
    func escapes() throws {
        let envelope = try parse(#"{"type":"a\"b\\c\u00e9\ud83d\ude00","payload":"x\ny"}"#)
        #expect(envelope.type == "a\"b\\cé😀")
    }

    @Test("a payload of any JSON kind is accepted", arguments: ["{}", "[]", "\"text\"", "-0.5E-3", "true", "null", "0"])
    func payloadKinds(payload: String) throws {
        let envelope = try parse(#"{"type":"T","payload":"# + payload + "}")
        #expect(String(buffer: envelope.payload) == payload)
    }

    @Test("malformed envelopes are rejected with a reason", arguments: [
        ("", "the frame is empty"),
        ("[1,2]", "the envelope is not a JSON object"),
        ("\"type\"", "the envelope is not a JSON object"),
        (#"{"payload":{}}"#, "the envelope has no \"type\""),
        (#"{"type":"T"}"#, "the envelope has no \"payload\""),
        (#"{"type":7,"payload":{}}"#, "the envelope's \"type\" is not a string"),
        (#"{"type":"","payload":{}}"#, "the envelope's \"type\" is empty"),
        (#"{"type":"T","payload":{}} x"#, "there are bytes after the envelope object"),
        (#"{"type":"T","payload":{"a":}}"#, "unexpected '}' at offset 27 where a JSON value was expected"),
        (#"{"type":"T","payload":[1 2]}"#, "unexpected '2' at offset 25 where ',' or ']' was expected"),
        (#"{"type":"T","payload":tru}"#, "an invalid literal where true was expected"),
        (#"{"type":"T","payload":01}"#, "unexpected '1' at offset 23 where ',' or '}' was expected"),
        (#"{"type":"T","payload":"\x"}"#, "a string has an invalid escape"),
        (#"{"type":"\ud800","payload":{}}"#, "a string has an unpaired surrogate escape"),
        (#"{"type":"T","payload":{}"#, "the envelope ends before its closing brace"),
        (#"{"type":"T","payload":"abc"#, "a string is not terminated"),
    ])
    func malformed(json: String, reason: String) {
        #expect(parseError(Array(json.utf8)) == .malformedEnvelope(reason))
    }

    @Test("a type that is not valid UTF-8 is rejected")
    func invalidUTF8() {
        let bytes = Array(#"{"type":""#.utf8) + [0xFF, 0xFE] + Array(#"","payload":{}}"#.utf8)
        #expect(parseError(bytes) == .malformedEnvelope("a string is not valid UTF-8 (byte 0xff at offset 9 does not start a valid sequence)"))
    }

    @Test("a raw control character in a string is rejected")
    func controlCharacter() {
        let bytes = Array(#"{"type":"a"#.utf8) + [0x01] + Array(#"","payload":{}}"#.utf8)
        #expect(parseError(bytes) == .malformedEnvelope("a string contains a raw control character (byte 0x1 at offset 10)"))
    }

    @Test("nesting deeper than the limit is rejected without exhausting the stack")
    func deepNesting() {
        let depth = EnvelopeParser.maximumDepth + 10
        let json = #"{"type":"T","payload":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"
        #expect(parseError(Array(json.utf8)) == .malformedEnvelope("the JSON nests deeper than \(EnvelopeParser.maximumDepth) levels"))
    }

    @Test("random and mutated frames either fail with a WireError or parse to an envelope that re-encodes to itself")
    func fuzz() {
        let seed = ProcessInfo.processInfo.environment["PEERKIT_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0 ... .max)
        print("EnvelopeParserTests.fuzz: seed \(seed) (set PEERKIT_FUZZ_SEED=\(seed) to run these inputs again)")
        var generator = SeededGenerator(seed: seed)
        let alphabet = Array(#"{}[]",:\ tuefalsnr0123456789.-eEtypeayloadidTX"#.utf8) + [0x00, 0xFF, 0xC3]
        let valid = [
            #"{"type":"Note","payload":{"text":"hi"}}"#,
            #"{"type":"Q","id":"7","replyTo":"3","group":"kitchen","payload":[1,2.5e3,true,null,"x"]}"#,
            #"{"payload":{"a":{"b":[{}]}},"type":"T","id":"1"}"#,
        ].map { Array($0.utf8) }
        var parsed = 0, refused = 0
        for index in 0..<5000 {
            var bytes: [UInt8]
            if index.isMultiple(of: 2) {
                // Random bytes from JSON's alphabet.
                bytes = (0..<Int.random(in: 0..<64, using: &generator)).map { _ in generator.pick(alphabet) }
            } else {
                // A valid envelope with a few bytes replaced, inserted or removed.
                bytes = generator.pick(valid)
                for _ in 0..<Int.random(in: 1...3, using: &generator) where !bytes.isEmpty {
                    let at = Int.random(in: 0..<bytes.count, using: &generator)
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: bytes[at] = generator.pick(alphabet)
                    case 1: bytes.insert(generator.pick(alphabet), at: at)
                    default: bytes.remove(at: at)
                    }
                }
            }
            let input = "seed \(seed), input \(index): \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            let envelope: Envelope
            do {
                envelope = try EnvelopeParser.parse(ByteBuffer(bytes: bytes))
            } catch {
                // Typed throws: every failure is a WireError, and a refused envelope says why.
                guard case let .malformedEnvelope(reason) = error else {
                    Issue.record("\(input): \(error) is not malformedEnvelope")
                    continue
                }
                #expect(!reason.isEmpty, "\(input)")
                refused += 1
                continue
            }
            parsed += 1
            // What was accepted is written again by the encoder and parses to the same envelope.
            var frame = EnvelopeEncoder.frame(type: envelope.type, id: envelope.id, replyTo: envelope.replyTo, group: envelope.group, payload: envelope.payload.readableBytesView)
            #expect(frame.readInteger(as: UInt32.self).map(Int.init) == frame.readableBytes, "\(input)")
            #expect((try? EnvelopeParser.parse(frame)) == envelope, "\(input)")
        }
        // Both outcomes were exercised.
        #expect(parsed > 100 && refused > 100, "seed \(seed): \(parsed) parsed, \(refused) refused")
    }

    /// `frame`'s body as the frame decoder hands it on: a slice of a larger read, past its
    /// length field and after other bytes.
    private func body(of frame: ByteBuffer) -> ByteBuffer {
        var read = ByteBuffer(string: "earlier bytes")
        read.moveReaderIndex(forwardBy: read.readableBytes)
        var copy = frame
        copy.moveReaderIndex(forwardBy: 4)
        read.writeImmutableBuffer(copy)
        read.writeString("later bytes")
        return read.getSlice(at: read.readerIndex, length: copy.readableBytes) ?? ByteBuffer()
    }

    @Test("a ping or pong as PeerKit writes it is read without the scan, into the envelope the scan gives")
    func heartbeatShortcut() throws {
        let ids = ["0", "17", String(UInt64.max), "", "a b~", String(repeating: "9", count: 32)]
        let frames = ids.flatMap { id in
            [ConnectionStateMachine.ControlFrame.ping(id: id), .pong(replyTo: id)].map { body(of: $0.encode()) }
        }
        for frame in frames {
            let shortcut = try #require(EnvelopeParser.heartbeat(frame), "\(String(buffer: frame))")
            #expect(shortcut == (try EnvelopeParser.scanned(frame)), "\(String(buffer: frame))")
            #expect(shortcut.isControl)
        }
        #expect(EnvelopeParser.heartbeat(frames[2])?.id == "17")
        #expect(EnvelopeParser.heartbeat(frames[3])?.replyTo == "17")
    }

    @Test("any other frame, a ping or pong written otherwise among them, is scanned, with the same result or error")
    func heartbeatShortcutDeclines() throws {
        let others = [
            #"{"type":"peerkit.ping","id":"a\"b","payload":{}}"#,
            #"{"type":"peerkit.ping","id":"\u0041","payload":{}}"#,
            #"{"type":"peerkit.ping","id":"é","payload":{}}"#,
            #"{"type":"peerkit.ping","id":"\#(String(repeating: "9", count: 40))","payload":{}}"#,
            #"{"type": "peerkit.ping","id":"1","payload":{}}"#,
            #"{"type":"peerkit.ping","id":"1","payload":{} }"#,
            #"{"type":"peerkit.ping","id":"1","payload":{"a":1}}"#,
            #"{"type":"peerkit.ping","id":"1","group":"g","payload":{}}"#,
            #"{"type":"peerkit.ping","replyTo":"1","payload":{}}"#,
            #"{"type":"peerkit.pong","id":"1","payload":{}}"#,
            #"{"type":"peerkit.pingx","id":"1","payload":{}}"#,
            #"{"type":"peerkit.ping","id":"1","payload":{}}x"#,
            #"{"type":"peerkit.ping","id":"1","payload":{}"#,
            #"{"type":"peerkit.ping","id":"1"}"#,
            #"{"type":"peerkit.ping","id":"1","payload":{}}}"#,
            #"{"id":"1","type":"peerkit.ping","payload":{}}"#,
            #"{"type":"Note","id":"1","payload":{}}"#,
        ]
        for json in others {
            let frame = ByteBuffer(string: json)
            #expect(EnvelopeParser.heartbeat(frame) == nil, "\(json)")
            let parsed = Result { () throws(WireError) in try EnvelopeParser.parse(frame) }
            let scanned = Result { () throws(WireError) in try EnvelopeParser.scanned(frame) }
            #expect(parsed == scanned, "\(json)")
        }
    }
}
