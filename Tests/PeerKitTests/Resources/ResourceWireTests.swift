import NIOCore
import Testing
@testable import PeerKit

/// The `resources` feature without I/O: the chunk frame codec, the hello's `features`, and the
/// state machine's negotiation.
@Suite("Resources on the wire (codec and state machine)")
struct ResourceWireTests {
    typealias Machine = ConnectionStateMachine
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func machine(localFeatures: [String]?) -> Machine {
        Machine(configuration: .init(
            localHello: Hello(peerID: "A", name: "alpha", serviceType: "chat", discoveryInfo: nil, features: localFeatures),
            heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5)
        ))
    }

    func body(_ frame: ByteBuffer) -> ByteBuffer {
        var frame = frame
        _ = frame.readInteger(as: UInt32.self)
        return frame
    }

    func established(localFeatures: [String]?, remoteFeatures: [String]?) throws -> Machine {
        var machine = machine(localFeatures: localFeatures)
        _ = machine.activated(now: start)
        let remote = Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: nil, features: remoteFeatures)
        let hello = try EnvelopeParser.parse(body(Machine.ControlFrame.hello(remote).encode()))
        #expect(machine.frameReceived(hello, now: start) == .established(remote))
        return machine
    }

    @Test("a chunk frame is the length, 0x00, the transfer ID and the raw bytes, and decodes back")
    func chunkRoundTrip() throws {
        let frame = ResourceChunkFrame.encode(transfer: 0x0102_0304, data: ByteBuffer(bytes: [0xde, 0xad, 0xbe, 0xef]))
        #expect(Array(frame.readableBytesView) == [0, 0, 0, 9, 0, 1, 2, 3, 4, 0xde, 0xad, 0xbe, 0xef])
        let body = body(frame)
        #expect(ResourceChunkFrame.isChunk(body))
        let chunk = try ResourceChunkFrame.decode(body)
        #expect(chunk.transfer == 0x0102_0304)
        #expect(Array(chunk.data.readableBytesView) == [0xde, 0xad, 0xbe, 0xef])
        #expect(!ResourceChunkFrame.isChunk(ByteBuffer(string: #"{"type":"x","payload":{}}"#)))
    }

    @Test("a chunk frame shorter than its header is refused")
    func shortChunk() {
        #expect(throws: WireError.self) { try ResourceChunkFrame.decode(ByteBuffer(bytes: [0, 1, 2])) }
    }

    @Test("the hello lists features as an array after the other keys, and omits it when there are none")
    func helloFeatures() {
        let with = Hello(peerID: "A", name: "a", serviceType: "chat", discoveryInfo: nil, features: ["resources"])
        #expect(String(buffer: body(Machine.ControlFrame.hello(with).encode())) ==
            #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"A","name":"a","serviceType":"chat","features":["resources"]}}"#)
        let without = Hello(peerID: "A", name: "a", serviceType: "chat", discoveryInfo: nil)
        #expect(!String(buffer: body(Machine.ControlFrame.hello(without).encode())).contains("features"))
    }

    @Test("with both hellos listing resources, chunks and resource frames are delivered")
    func negotiated() throws {
        var machine = try established(localFeatures: ["resources"], remoteFeatures: ["groups", "resources"])
        #expect(machine.negotiated(Hello.Feature.resources))
        let chunk = try ResourceChunkFrame.decode(body(ResourceChunkFrame.encode(transfer: 7, data: ByteBuffer(bytes: [1, 2, 3]))))
        #expect(machine.chunkReceived(chunk, now: start) == .deliverChunk(ResourceChunk(transfer: 7, data: ByteBuffer(bytes: [1, 2, 3]))))
        let offer = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"n"}}"#))
        #expect(machine.frameReceived(offer, now: start) == .deliver(offer))
    }

    @Test("a peer whose hello has no features (an old peer): its resource frames are ignored, a binary frame fails the connection")
    func oldPeer() throws {
        var machine = try established(localFeatures: ["resources"], remoteFeatures: nil)
        #expect(!machine.negotiated(Hello.Feature.resources))
        let offer = try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"n"}}"#))
        #expect(machine.frameReceived(offer, now: start) == .none)
        let chunk = try ResourceChunkFrame.decode(body(ResourceChunkFrame.encode(transfer: 7, data: ByteBuffer(bytes: [1]))))
        let failure = Machine.Failure.malformed("a binary frame arrived, and the resources feature was not negotiated")
        #expect(machine.chunkReceived(chunk, now: start) == .close(sending: .error(reason: "Closing the connection: " + failure.reason + ".", replyTo: nil), mode: .halfClose, reason: .failed(failure)))
    }

    @Test("a binary frame before the hello fails the handshake")
    func binaryBeforeHello() throws {
        var machine = machine(localFeatures: ["resources"])
        _ = machine.activated(now: start)
        let chunk = try ResourceChunkFrame.decode(body(ResourceChunkFrame.encode(transfer: 1, data: ByteBuffer(bytes: [1]))))
        guard case .close(_, _, .failed(.handshake)) = machine.chunkReceived(chunk, now: start) else {
            Issue.record("expected a handshake failure")
            return
        }
    }

    @Test("a hello with too many features or an overlong feature name is refused")
    func featureLimits() throws {
        for features in [Array(repeating: "x", count: 33), [String(repeating: "f", count: 65)]] {
            var machine = machine(localFeatures: ["resources"])
            _ = machine.activated(now: start)
            let remote = Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: nil, features: features)
            let hello = try EnvelopeParser.parse(body(Machine.ControlFrame.hello(remote).encode()))
            guard case .close(_, _, .failed(.handshake)) = machine.frameReceived(hello, now: start) else {
                Issue.record("expected \(features.count) features to be refused")
                continue
            }
        }
    }

    @Test("a violation reported by the layer above fails the connection with peerkit.error")
    func violation() throws {
        var machine = try established(localFeatures: ["resources"], remoteFeatures: ["resources"])
        guard case .close(.error(let reason, nil), .halfClose, .failed(.malformed)) = machine.violationReported("over the window") else {
            Issue.record("expected a malformed-frame failure")
            return
        }
        #expect(reason == "Closing the connection: over the window.")
        #expect(machine.violationReported("again") == .none)
    }
}
