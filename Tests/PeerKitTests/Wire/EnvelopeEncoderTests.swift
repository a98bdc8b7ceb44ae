import NIOCore
import Testing
@testable import PeerKit

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

    @Test("wire keys in the reserved peerkit. namespace cannot be sent")
    func reservedKeys() {
        struct Sneaky: Codable, PeerMessage { static var messageType: String { "peerkit.hello" } }
        #expect(throws: PeerKitError.encodingFailed(type: "peerkit.hello", reason: "wire keys starting with \"peerkit.\" are reserved for the protocol")) {
            try MessageCodec.encode(Sneaky())
        }
    }

    @Test("a payload of the wrong shape gives a decoding error that names the key")
    func wrongPayload() {
        struct Item: Codable { var title: String }
        #expect(throws: PeerKitError.payloadDecodingFailed(type: "Item", reason: "the key \"title\" is missing from the payload")) {
            try MessageCodec.decode(Item.self, from: ByteBuffer(string: #"{"name":"x"}"#))
        }
    }
}
