import NIOCore
import Testing
@testable import PeerKit

@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine

    let local = Hello(peerID: "A", name: "alpha", serviceType: "chat", discoveryInfo: nil)
    let remote = Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: ["k": "v"])
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func machine() -> Machine {
        Machine(configuration: .init(localHello: local, heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5)))
    }

    func envelope(_ json: String) throws -> Envelope {
        try EnvelopeParser.parse(ByteBuffer(string: json))
    }

    func helloEnvelope(_ hello: Hello) throws -> Envelope {
        var frame = Machine.ControlFrame.hello(hello).encode()
        _ = frame.readInteger(as: UInt32.self)
        return try EnvelopeParser.parse(frame)
    }

    func established() throws -> Machine {
        var machine = machine()
        _ = machine.activated(now: start)
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == .established(remote))
        return machine
    }

    @Test("activation sends our hello; the peer's hello establishes the connection")
    func handshake() throws {
        var machine = machine()
        #expect(machine.activated(now: start) == .send(.hello(local)))
        #expect(machine.remoteHello == nil)
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == .established(remote))
        #expect(machine.remoteHello == remote)
    }

    @Test("a first frame that is not a hello fails the handshake")
    func firstFrameNotHello() throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"AddItemCommand","payload":{}}"#), now: start)
        #expect(action == .fail(.handshake("the first frame was a \"AddItemCommand\" message, not peerkit.hello")))
        #expect(machine.isClosed)
    }

    @Test("a hello of another service type, protocol, or our own peer ID is refused", arguments: [
        (#"{"protocol":1,"peerID":"B","name":"b","serviceType":"other"}"#, "the peer's service type is \"other\", not \"chat\""),
        (#"{"protocol":2,"peerID":"B","name":"b","serviceType":"chat"}"#, "the peer speaks protocol 2, and this peer speaks only protocol 1"),
        (#"{"protocol":1,"peerID":"A","name":"a","serviceType":"chat"}"#, "the connection leads back to this peer itself"),
        (#"{"protocol":1,"peerID":"","name":"a","serviceType":"chat"}"#, "the peer's peerID is empty"),
        (#"{"protocol":1,"name":"a","serviceType":"chat"}"#, "the peerkit.hello payload lacks protocol, peerID, name or serviceType"),
    ])
    func badHello(payload: String, reason: String) throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"peerkit.hello","payload":"# + payload + "}"), now: start)
        #expect(action == .fail(.handshake(reason)))
    }

    @Test("a hello with extra keys (e.g. a later authentication field) is accepted")
    func helloWithExtraKeys() throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"B","name":"b","serviceType":"chat","auth":{"nonce":"x"}}}"#), now: start)
        #expect(action == .established(Hello(peerID: "B", name: "b", serviceType: "chat", discoveryInfo: nil)))
    }

    @Test("a second hello after the handshake is a protocol violation")
    func helloFlood() throws {
        var machine = try established()
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == .fail(.handshake("a second peerkit.hello arrived after the handshake")))
        // Terminal: nothing more happens.
        #expect(machine.frameReceived(try envelope(#"{"type":"X","payload":{}}"#), now: start) == .none)
        #expect(machine.heartbeat(now: start + .seconds(60)) == .none)
    }

    @Test("pings are answered with pongs that name them; messages are delivered; unknown control types ignored")
    func established_traffic() throws {
        var machine = try established()
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.ping","id":"p9","payload":{}}"#), now: start) == .send(.pong(replyTo: "p9")))
        let message = try envelope(#"{"type":"X","id":"1","payload":{"a":1}}"#)
        #expect(machine.frameReceived(message, now: start) == .deliver(message))
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.future","payload":{}}"#), now: start) == .none)
        let errorReply = try envelope(#"{"type":"peerkit.error","replyTo":"1","payload":{"reason":"No."}}"#)
        #expect(machine.frameReceived(errorReply, now: start) == .deliver(errorReply))
    }

    @Test("an idle peer is pinged once per silence, and one silent past the timeout is dropped")
    func heartbeat() throws {
        var machine = try established()
        #expect(machine.heartbeat(now: start + .milliseconds(400)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(500)) == .send(.ping(id: "ping-1")))
        // The ping is outstanding: no second ping.
        #expect(machine.heartbeat(now: start + .milliseconds(1000)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(2499)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(2500)) == .fail(.timedOut(silence: .milliseconds(2500))))
        #expect(machine.isClosed)
    }

    @Test("a pong or any frame resets the silence")
    func pongResets() throws {
        var machine = try established()
        #expect(machine.heartbeat(now: start + .milliseconds(500)) == .send(.ping(id: "ping-1")))
        _ = machine.frameReceived(try envelope(#"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#), now: start + .milliseconds(600))
        #expect(machine.heartbeat(now: start + .milliseconds(1000)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(1100)) == .send(.ping(id: "ping-2")))
        #expect(machine.heartbeat(now: start + .milliseconds(3099)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(3100)) == .fail(.timedOut(silence: .milliseconds(2500))))
    }

    @Test("no hello within the handshake timeout fails the connection")
    func handshakeTimeout() {
        var machine = machine()
        _ = machine.activated(now: start)
        #expect(machine.heartbeat(now: start + .seconds(4)) == .none)
        #expect(machine.heartbeat(now: start + .seconds(5)) == .fail(.handshake("no peerkit.hello arrived within 5.0 s")))
    }

    @Test("bye closes gracefully and carries its optional reason")
    func bye() throws {
        var machine = try established()
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.bye","payload":{"reason":"duplicate connection"}}"#), now: start) == .close(byeReason: "duplicate connection"))
        var other = try established()
        #expect(other.frameReceived(try envelope(#"{"type":"peerkit.bye","payload":{}}"#), now: start) == .close(byeReason: nil))
    }

    @Test("closing says bye only after the handshake")
    func closing() throws {
        var fresh = machine()
        _ = fresh.activated(now: start)
        #expect(fresh.closeRequested() == .none)
        var machine = try established()
        #expect(machine.closeRequested() == .send(.bye(reason: nil)))
    }

    @Test("an oversized or malformed frame fails the connection")
    func rejectedFrames() throws {
        var machine = try established()
        #expect(machine.frameRejected(.frameTooLarge(length: 99, limit: 10)) == .fail(.frameTooLarge(length: 99, limit: 10)))
        var other = try established()
        #expect(other.frameRejected(.malformedEnvelope("the envelope has no \"type\"")) == .fail(.malformed("the envelope has no \"type\"")))
    }
}

@Suite("Tie-break")
struct TieBreakTests {
    @Test("both sides keep the connection dialled by the smaller peer ID")
    func symmetric() {
        // "A" < "B": keep the connection A dialled. On A it is outbound, on B inbound.
        #expect(TieBreak.newConnectionWins(existing: .inbound, new: .outbound, localPeerID: "A", remotePeerID: "B"))
        #expect(!TieBreak.newConnectionWins(existing: .outbound, new: .inbound, localPeerID: "A", remotePeerID: "B"))
        #expect(TieBreak.newConnectionWins(existing: .outbound, new: .inbound, localPeerID: "B", remotePeerID: "A"))
        #expect(!TieBreak.newConnectionWins(existing: .inbound, new: .outbound, localPeerID: "B", remotePeerID: "A"))
    }

    @Test("two connections dialled by the same side keep the older one")
    func sameDirection() {
        #expect(!TieBreak.newConnectionWins(existing: .outbound, new: .outbound, localPeerID: "A", remotePeerID: "B"))
        #expect(!TieBreak.newConnectionWins(existing: .inbound, new: .inbound, localPeerID: "A", remotePeerID: "B"))
    }

    @Test("peer IDs compare byte-wise, not by locale")
    func byteWise() {
        // "Z" (0x5A) < "a" (0x61) byte-wise.
        #expect(TieBreak.newConnectionWins(existing: .inbound, new: .outbound, localPeerID: "Z", remotePeerID: "a"))
    }
}

@Suite("Back-off")
struct BackoffTests {
    @Test("delays double from the initial delay up to the cap, within the jitter band")
    func growth() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0.2)
        #expect(backoff.delay(attempt: 0, random: 0.5) == .milliseconds(100))
        #expect(backoff.delay(attempt: 1, random: 0.5) == .milliseconds(200))
        #expect(backoff.delay(attempt: 3, random: 0.5) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, random: 0.5) == .seconds(1))
        #expect(backoff.delay(attempt: 10, random: 0) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, random: 0.999999) <= .milliseconds(1200))
        #expect(backoff.delay(attempt: 10_000, random: 0.5) == .seconds(1))
    }
}
