import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

/// Records what a connection reports.
final class RecordingDelegate: PeerConnectionDelegate {
    enum Call: Equatable {
        case established(Hello)
        case received(String)
        case reported(PeerKitError)
        case closed(PeerKitError?, bye: String?)
    }

    private let calls = NIOLockedValueBox<[Call]>([])
    var recorded: [Call] { calls.withLockedValue { $0 } }

    func connectionEstablished(_ connection: PeerConnection, remote: Hello) { calls.withLockedValue { $0.append(.established(remote)) } }
    func connection(_ connection: PeerConnection, received envelope: Envelope) { calls.withLockedValue { $0.append(.received(envelope.type)) } }
    func connection(_ connection: PeerConnection, reported error: PeerKitError) { calls.withLockedValue { $0.append(.reported(error)) } }
    func connectionClosed(_ connection: PeerConnection, error: PeerKitError?, byeReason: String?) {
        calls.withLockedValue { $0.append(.closed(error, bye: byeReason)) }
    }
}

/// The handler on an `EmbeddedChannel`, with time under the test's control.
@Suite("Connection handler (embedded channel, injected time)")
struct PeerConnectionHandlerTests {
    let local = Hello(peerID: "A", name: "alpha", serviceType: "chat", discoveryInfo: nil)
    let remote = Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: nil)

    func makeChannel(delegate: RecordingDelegate, limit: Int = 1024) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let configuration = ConnectionStateMachine.Configuration(
            localHello: local, heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5)
        )
        let handler = PeerConnectionHandler(configuration: configuration, delegate: delegate) { channel in
            PeerConnection(channel: channel, direction: .inbound, serviceKey: nil)
        }
        try PeerPipeline.configure(channel, maximumFrameLength: limit, handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4000)).wait()
        channel.embeddedEventLoop.run()
        return channel
    }

    /// Every frame written so far, as envelope JSON text.
    func written(_ channel: EmbeddedChannel) throws -> [String] {
        var frames: [String] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            while let length = buffer.readInteger(as: UInt32.self), let body = buffer.readString(length: Int(length)) {
                frames.append(body)
            }
        }
        return frames
    }

    @Test("the handler says hello on connect and reports the peer once its hello arrives")
    func handshake() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        #expect(try written(channel) == [#"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"A","name":"alpha","serviceType":"chat"}}"#])
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        try channel.writeInbound(ByteBuffer.frame(#"{"type":"Note","payload":{"text":"hi"}}"#))
        #expect(delegate.recorded == [.established(remote), .received("Note")])
        _ = try? channel.finish()
    }

    @Test("a peer that stops answering pings is reported disconnected after the timeout")
    func expiry() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        _ = try written(channel)

        channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        #expect(try written(channel) == [#"{"type":"peerkit.ping","id":"ping-1","payload":{}}"#])
        #expect(channel.isActive)

        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1500))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        #expect(!channel.isActive)
        #expect(delegate.recorded.last == .closed(.peerTimedOut(peer: "\"beta\" at 127.0.0.1:4000", silence: .milliseconds(2500)), bye: nil))
    }

    @Test("a peer that answers pings stays connected")
    func answeredPings() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        for round in 1...10 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            let frames = try written(channel)
            #expect(frames.last == #"{"type":"peerkit.ping","id":"ping-\#(round)","payload":{}}"#)
            try channel.writeInbound(ConnectionStateMachine.ControlFrame.pong(replyTo: "ping-\(round)").encode())
        }
        #expect(channel.isActive)
        _ = try? channel.finish()
    }

    @Test("an oversized frame gets peerkit.error and the connection is closed")
    func oversized() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate, limit: 256)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        _ = try written(channel)
        var huge = ByteBuffer()
        huge.writeInteger(UInt32.max)
        _ = try? channel.writeInbound(huge)
        channel.embeddedEventLoop.run()
        #expect(try written(channel) == [#"{"type":"peerkit.error","payload":{"reason":"Closing the connection: a frame of 4294967295 bytes exceeds the 256-byte limit."}}"#])
        #expect(!channel.isActive)
        #expect(delegate.recorded.last == .closed(.frameTooLarge(length: 4_294_967_295, limit: 256, peer: "\"beta\" at 127.0.0.1:4000"), bye: nil))
    }

    @Test("garbage before the hello gets peerkit.error and a close, and no peer is reported")
    func garbageFirst() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        _ = try written(channel)
        try channel.writeInbound(ByteBuffer.frame("GET / HTTP/1.1"))
        channel.embeddedEventLoop.run()
        #expect(try written(channel).first == #"{"type":"peerkit.error","payload":{"reason":"Closing the connection: the envelope is not a JSON object."}}"#)
        #expect(!channel.isActive)
        #expect(!delegate.recorded.contains { if case .established = $0 { return true } else { return false } })
    }
}
