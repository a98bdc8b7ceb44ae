import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

@Suite("Envelope encoding")
struct EnvelopeEncoderTests {
    @Test("a frame is a 4-byte big-endian length followed by the envelope JSON, keys in documented order")
    func layout() throws {
        var frame = EnvelopeEncoder.frame(type: "AddItemCommand", id: "r1", replyTo: nil, payload: Array(#"{"title":"Milk"}"#.utf8))
        let length = frame.readInteger(as: UInt32.self)
        #expect(length.map(Int.init) == frame.readableBytes)
        #expect(String(buffer: frame) == #"{"type":"AddItemCommand","id":"r1","payload":{"title":"Milk"}}"#)
    }

    @Test("strings that need escaping are escaped and parse back unchanged")
    func escapingRoundTrip() throws {
        let type = "quote\" backslash\\ newline\n tab\t bell\u{07} é 😀"
        var frame = EnvelopeEncoder.frame(type: type, replyTo: "x\"y", payload: Array("{}".utf8))
        _ = frame.readInteger(as: UInt32.self)
        let envelope = try EnvelopeParser.parse(frame)
        #expect(envelope.type == type)
        #expect(envelope.replyTo == "x\"y")
    }

    @Test("control frames are written exactly as Protocol.md shows them")
    func controlFrames() {
        func body(_ frame: ConnectionStateMachine.ControlFrame) -> String {
            var buffer = frame.encode()
            _ = buffer.readInteger(as: UInt32.self)
            return String(buffer: buffer)
        }
        let hello = Hello(peerID: "A1", name: "Kitchen", serviceType: "listrctl", discoveryInfo: ["role": "store", "a": "b"])
        #expect(body(.hello(hello)) == #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"A1","name":"Kitchen","serviceType":"listrctl","discoveryInfo":{"a":"b","role":"store"}}}"#)
        #expect(body(.ping(id: "ping-1")) == #"{"type":"peerkit.ping","id":"ping-1","payload":{}}"#)
        #expect(body(.pong(replyTo: "ping-1")) == #"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#)
        #expect(body(.bye(reason: nil)) == #"{"type":"peerkit.bye","payload":{}}"#)
        #expect(body(.error(reason: "No handler for type X.", replyTo: "4")) == #"{"type":"peerkit.error","replyTo":"4","payload":{"reason":"No handler for type X."}}"#)
    }

    @Test("a control frame written into a buffer appends the bytes it encodes to, after what is there")
    func controlFramesInPlace() {
        let frames: [ConnectionStateMachine.ControlFrame] = [
            .hello(Hello(peerID: "A1", name: "Kitchen", serviceType: "listrctl", discoveryInfo: nil)),
            .ping(id: "ping-1"), .pong(replyTo: "ping-1"), .bye(reason: "done"), .rename(name: "Hall"),
            .error(reason: "No handler for type X.", replyTo: "4"),
        ]
        for frame in frames {
            var buffer = ByteBuffer(string: "before")
            frame.encode(into: &buffer)
            var expected = ByteBuffer(string: "before")
            expected.writeImmutableBuffer(frame.encode())
            #expect(buffer == expected, "\(frame)")
        }
    }

    @Test("a message payload is encoded once with its wire key")
    func messageCodec() throws {
        struct Ping: Codable, Equatable { var text: String; var n: Int }
        struct Named: Codable, PeerMessage { static var messageType: String { "com.example.Named" } }
        let message = try MessageCodec.encode(Ping(text: "a/b", n: 2))
        #expect(message.type == "Ping")
        #expect(String(buffer: message.payload).contains(#""a/b""#))
        #expect(try MessageCodec.decode(Ping.self, from: message.payload) == Ping(text: "a/b", n: 2))
        #expect(try MessageCodec.encode(Named()).type == "com.example.Named")
    }

    @Test("a message encoded straight into its frame is the frame EnvelopeEncoder writes around its payload", arguments: [0, 100, 70_000])
    func encodedIntoItsFrame(length: Int) throws {
        struct Note: Codable, Equatable { var text: String; var tags: [String] }
        let note = Note(text: String(repeating: "é\"x", count: length / 4), tags: ["a", String(repeating: "b", count: length)])
        let message = try MessageCodec.encode(note)
        let payload = try PayloadEncoder.encode(note)
        #expect(message.payload == payload)
        #expect(message.frame() == EnvelopeEncoder.frame(type: "Note", payload: payload.readableBytesView))
        // With an id, a replyTo or a group the frame is written anew around the same payload.
        #expect(message.frame(id: "r1") == EnvelopeEncoder.frame(type: "Note", id: "r1", payload: payload.readableBytesView))
        #expect(message.frame(replyTo: "r2", group: "g") == EnvelopeEncoder.frame(type: "Note", replyTo: "r2", group: "g", payload: payload.readableBytesView))
        var frame = message.frame()
        _ = frame.readInteger(as: UInt32.self)
        #expect(try EnvelopeParser.parse(frame).decodePayload(Note.self) == note)
    }

    @Test("a request or a reply encoded with its id or replyTo is sent in the frame it was encoded into, not a copy")
    func encodedWithItsAddress() throws {
        struct Note: Codable, Equatable { var text: String }
        let note = Note(text: "milk")
        let payload = try PayloadEncoder.encode(note)
        /// Whether `message`'s payload bytes lie inside `frame`'s: the frame is the one it was encoded into.
        func isEncodedFrame(_ frame: ByteBuffer, of message: EncodedMessage) -> Bool {
            let start = frame.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
            let inside = message.payload.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
            return inside > start && inside < start + UInt(frame.readableBytes)
        }
        let request = try MessageCodec.encode(note, id: "7")
        #expect(request.frame(id: "7") == EnvelopeEncoder.frame(type: "Note", id: "7", payload: payload.readableBytesView))
        #expect(isEncodedFrame(request.frame(id: "7"), of: request))
        let reply = try MessageCodec.encode(note, replyTo: "7")
        #expect(reply.frame(replyTo: "7") == EnvelopeEncoder.frame(type: "Note", replyTo: "7", payload: payload.readableBytesView))
        #expect(isEncodedFrame(reply.frame(replyTo: "7"), of: reply))
        // Asked for another address, or for a group, the frame is written anew around the payload.
        #expect(request.frame() == EnvelopeEncoder.frame(type: "Note", payload: payload.readableBytesView))
        #expect(!isEncodedFrame(request.frame(), of: request))
        #expect(request.frame(id: "8") == EnvelopeEncoder.frame(type: "Note", id: "8", payload: payload.readableBytesView))
        #expect(reply.frame(replyTo: "7", group: "g") == EnvelopeEncoder.frame(type: "Note", replyTo: "7", group: "g", payload: payload.readableBytesView))
        let plain = try MessageCodec.encode(note)
        #expect(isEncodedFrame(plain.frame(), of: plain))
    }

    @Test("a value the streaming encoder gives up on is framed from JSONEncoder's output, with nothing of the first attempt left")
    func encodedIntoItsFrameAfterFallback() throws {
        let message = try MessageCodec.encode(SuperEncodingDerived())
        var frame = message.frame()
        #expect(frame.readInteger(as: UInt32.self).map(Int.init) == frame.readableBytes)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(frame.readableBytesView)) as? [String: Any])
        #expect(body["type"] as? String == "SuperEncodingDerived")
        let payload = try #require(body["payload"] as? [String: Any])
        #expect(payload["extra"] as? Int == 2)
        #expect((payload["super"] as? [String: Any])?["base"] as? Int == 1)
        // The payload is the frame's payload value, not the streaming attempt's leftovers.
        let alone = try #require(try JSONSerialization.jsonObject(with: Data(message.payload.readableBytesView)) as? NSDictionary)
        #expect(alone == payload as NSDictionary)
    }

    @Test("wire keys in the reserved peerkit. namespace cannot be sent")
    func reservedKeys() {
        struct Sneaky: Codable, PeerMessage { static var messageType: String { "peerkit.hello" } }
        #expect(throws: PeerKitError.encodingFailed(type: "peerkit.hello", reason: "wire keys starting with \"peerkit.\" are reserved for the protocol")) {
            try MessageCodec.encode(Sneaky())
        }
    }

    @Test("a wire key is reserved when its UTF-8 bytes start with peerkit., on the sending and the receiving side alike")
    func reservedByBytes() throws {
        let reserved = ["peerkit.ping", "peerkit.", "peerkit.\u{301}x"]
        let free = ["peerkit", "Peerkit.x", "xpeerkit.y", "pe\u{301}erkit.x", ""]
        for key in reserved + free {
            let isReserved = reserved.contains(key)
            #expect(EnvelopeType.isReserved(key) == isReserved, "\(key.debugDescription)")
            #expect(WireKey(name: key).isReserved == isReserved, "\(key.debugDescription)")
            #expect(Envelope(type: key, payload: ByteBuffer(string: "{}")).isControl == isReserved, "\(key.debugDescription)")
        }
        // A combining mark after the dot makes another character of it, yet the bytes are reserved.
        #expect(!"peerkit.\u{301}x".hasPrefix("peerkit."))
    }

    @Test("a payload of the wrong shape gives a decoding error that names the key")
    func wrongPayload() {
        struct Item: Codable { var title: String }
        #expect(throws: PeerKitError.payloadDecodingFailed(type: "Item", reason: "the key \"title\" is missing from the payload")) {
            try MessageCodec.decode(Item.self, from: ByteBuffer(string: #"{"name":"x"}"#))
        }
    }
}
