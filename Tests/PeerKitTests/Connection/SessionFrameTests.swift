import NIOCore
import Testing
@testable import PeerKit

/// The `resume` feature's frames and hello field, as bytes: what another implementation reads.
@Suite("Session frames and the hello's session (feature resume)")
struct SessionFrameTests {
    func body(_ frame: ByteBuffer) -> String {
        var frame = frame
        let length = frame.readInteger(as: UInt32.self)
        #expect(length.map(Int.init) == frame.readableBytes)
        return String(buffer: frame)
    }

    @Test("the resume, resend and ack frames are written as Protocol.md shows them")
    func bytes() {
        #expect(body(SessionFrame.resume(received: 1042).encode()) == #"{"type":"peerkit.resume","payload":{"received":1042}}"#)
        let named = SessionFrame.resume(.init(received: 1042, epoch: "9f3b27c15e0a6d84", peerEpoch: "07c2e9a4b1d35f68"))
        #expect(body(named.encode()) == #"{"type":"peerkit.resume","payload":{"received":1042,"epoch":"9f3b27c15e0a6d84","peerEpoch":"07c2e9a4b1d35f68"}}"#)
        #expect(body(SessionFrame.resend(from: 1043).encode()) == #"{"type":"peerkit.resend","payload":{"from":1043}}"#)
        #expect(body(SessionFrame.ack(received: 1300).encode()) == #"{"type":"peerkit.ack","payload":{"received":1300}}"#)
    }

    @Test("each frame reads back as itself, over the whole range of its number")
    func roundTrip() throws {
        for frame in [SessionFrame.resume(received: 0), .resume(.init(received: 3, epoch: "a", peerEpoch: nil)),
                      .resume(.init(received: 3, epoch: "a", peerEpoch: String(repeating: "b", count: 64))), .resend(from: 1), .ack(received: UInt64.max)] {
            var bytes = frame.encode()
            bytes.moveReaderIndex(forwardBy: 4)
            #expect(try SessionFrame.parse(EnvelopeParser.parse(bytes)) == frame)
        }
    }

    @Test("a session frame whose payload is not as specified is a protocol violation; other types are not session frames")
    func malformed() throws {
        let negative = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.ack","payload":{"received":-1}}"#))
        #expect(throws: ConnectionStateMachine.Failure.self) { try SessionFrame.parse(negative) }
        let missing = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.resend","payload":{}}"#))
        #expect(throws: ConnectionStateMachine.Failure.self) { try SessionFrame.parse(missing) }
        for epoch in ["", String(repeating: "e", count: 65)] {
            let bad = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.resume","payload":{"received":1,"epoch":"\#(epoch)"}}"#))
            let failure = #expect(throws: ConnectionStateMachine.Failure.self) { try SessionFrame.parse(bad) }
            #expect("\(String(describing: failure))".contains("an epoch is 1 to 64 bytes"), "\(String(describing: failure))")
        }
        let other = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.ping","id":"p","payload":{}}"#))
        #expect(try SessionFrame.parse(other) == nil)
    }

    @Test("messages, requests, replies, group messages and error answers are numbered; the protocol's own frames are not")
    func numbered() {
        func envelope(_ type: String, id: String? = nil, replyTo: String? = nil, group: String? = nil) -> Envelope {
            Envelope(type: type, id: id, replyTo: replyTo, group: group, payload: ByteBuffer(string: "{}"))
        }
        #expect(SessionFrame.isNumbered(envelope("AddItemCommand")))
        #expect(SessionFrame.isNumbered(envelope("ListItemsCommand", id: "1")))
        #expect(SessionFrame.isNumbered(envelope("CLIResponse", replyTo: "1")))
        #expect(SessionFrame.isNumbered(envelope("LightCommand", group: "kitchen")))
        #expect(SessionFrame.isNumbered(envelope(EnvelopeType.error, replyTo: "1")))
        for type in [EnvelopeType.hello, EnvelopeType.ping, EnvelopeType.pong, EnvelopeType.bye, EnvelopeType.error, EnvelopeType.rename,
                     EnvelopeType.groups, "peerkit.resource.offer", SessionFrame.resumeType, SessionFrame.resendType, SessionFrame.ackType] {
            #expect(!SessionFrame.isNumbered(envelope(type)), "\(type) is numbered")
        }
    }

    @Test("the hello carries the sender's session after its features, and a hello without one still reads")
    func helloSession() throws {
        let hello = Hello(peerID: "A", name: "Kitchen", serviceType: "listrctl", discoveryInfo: nil, features: ["resume"], session: "3f2a9c0e1b7d4c55")
        let frame = ConnectionStateMachine.ControlFrame.hello(hello).encode()
        #expect(body(frame) == #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"A","name":"Kitchen","serviceType":"listrctl","features":["resume"],"session":"3f2a9c0e1b7d4c55"}}"#)
        var bytes = frame
        bytes.moveReaderIndex(forwardBy: 4)
        let decoded = try EnvelopeParser.parse(bytes).decodePayload(Hello.self)
        #expect(decoded == hello)
        #expect(decoded.resumableSession == "3f2a9c0e1b7d4c55")
        let older = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"B","name":"python","serviceType":"listrctl"}}"#)).decodePayload(Hello.self)
        #expect(older.session == nil)
        #expect(older.resumableSession == nil)
    }

    @Test("a session is used only with the feature listed and when it is 1 to 64 bytes")
    func usableSession() {
        #expect(Hello(peerID: "A", name: "n", serviceType: "s", discoveryInfo: nil, features: ["groups"], session: "x").resumableSession == nil)
        #expect(Hello(peerID: "A", name: "n", serviceType: "s", discoveryInfo: nil, features: ["resume"], session: "").resumableSession == nil)
        #expect(Hello(peerID: "A", name: "n", serviceType: "s", discoveryInfo: nil, features: ["resume"], session: String(repeating: "x", count: 65)).resumableSession == nil)
        #expect(Hello(peerID: "A", name: "n", serviceType: "s", discoveryInfo: nil, features: ["resume"], session: String(repeating: "x", count: 64)).resumableSession != nil)
    }
}
