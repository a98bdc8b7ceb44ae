import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

/// Records what a connection reports.
final class RecordingDelegate: PeerConnectionDelegate {
    enum Call: Equatable {
        case established(Hello)
        case renamed(String)
        case received(String)
        case chunk(UInt32, Int)
        case closed(ConnectionStateMachine.CloseReason)
    }

    private let calls = NIOLockedValueBox<[Call]>([])
    var recorded: [Call] { calls.withLockedValue { $0 } }
    private let handOffs = NIOLockedValueBox<[Int]>([])
    /// How many messages each `connection(_:received:)` call carried.
    var messagesPerHandOff: [Int] { handOffs.withLockedValue { $0 } }
    private let pausedAtHandOffs = NIOLockedValueBox<[Bool]>([])
    /// Whether the connection's reading was paused when each hand-off reached the delegate.
    var pausedAtHandOff: [Bool] { pausedAtHandOffs.withLockedValue { $0 } }

    func connectionEstablished(_ connection: PeerConnection, remote: Hello) { calls.withLockedValue { $0.append(.established(remote)) } }
    func connection(_ connection: PeerConnection, received envelopes: [Envelope]) {
        calls.withLockedValue { $0.append(contentsOf: envelopes.map { .received($0.type) }) }
        handOffs.withLockedValue { $0.append(envelopes.count) }
        pausedAtHandOffs.withLockedValue { $0.append(connection.isReadingPaused) }
    }
    func connection(_ connection: PeerConnection, received chunk: ResourceChunk) { calls.withLockedValue { $0.append(.chunk(chunk.transfer, chunk.data.readableBytes)) } }
    func connectionRenamed(_ connection: PeerConnection, remote: Hello) { calls.withLockedValue { $0.append(.renamed(remote.name)) } }
    func connectionClosed(_ connection: PeerConnection, reason: ConnectionStateMachine.CloseReason) {
        calls.withLockedValue { $0.append(.closed(reason)) }
    }
}

/// The handler on an `EmbeddedChannel`, with time under the test's control.
@Suite("Connection handler (embedded channel, injected time)")
struct PeerConnectionHandlerTests {
    let local = Hello(peerID: "A", name: "alpha", serviceType: "chat", discoveryInfo: nil)
    let remote = Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: nil)

    func makeChannel(delegate: RecordingDelegate, limit: Int = 1024, handshakeLimit: Int = 1024, inboundLimit: Int = 4 << 20, connection: NIOLockedValueBox<PeerConnection?>? = nil, ticker: HeartbeatTicker? = nil) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let configuration = ConnectionStateMachine.Configuration(
            localHello: local, heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5),
            maximumFrameLength: limit
        )
        let frameLimit = FrameLengthLimit(handshakeLimit)
        let handler = PeerConnectionHandler(configuration: configuration, frameLimit: frameLimit, ticker: ticker, delegate: delegate) { channel in
            let made = PeerConnection(channel: channel, direction: .inbound, serviceKey: nil, maximumQueuedInboundBytes: inboundLimit)
            connection?.withLockedValue { $0 = made }
            return made
        }
        try PeerPipeline.configure(channel, limit: frameLimit, handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4000)).wait()
        channel.embeddedEventLoop.run()
        return channel
    }

    /// A channel whose handshake with ``remote`` is done, and its connection.
    func establishedChannel(delegate: RecordingDelegate, inboundLimit: Int) throws -> (EmbeddedChannel, PeerConnection) {
        let box = NIOLockedValueBox<PeerConnection?>(nil)
        let channel = try makeChannel(delegate: delegate, inboundLimit: inboundLimit, connection: box)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        return (channel, try #require(box.withLockedValue { $0 }))
    }

    @Test("with the shared ticker, a connection whose handshake completes after its first look is pinged an interval later, not at the handshake's deadline")
    func tickerLooksAgainAfterTheHandshake() throws {
        let delegate = RecordingDelegate()
        // The ticker on the real clock, here the embedded loop's time: a grid tick every 250 ms.
        let channel = try makeChannel(delegate: delegate, ticker: HeartbeatTicker(interval: .milliseconds(250)))
        // Looked at, still handshaking, at 0.25 and 0.5 s: its next look would be the handshake's 5 s deadline.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(600))
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        #expect(delegate.recorded == [.established(remote)])
        _ = try written(channel)
        // Open at 0.6 s with a 500 ms interval: pinged at the 1.0 s tick (375 ms of silence).
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(399))
        #expect(try written(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(try written(channel).map { $0.contains(#""type":"peerkit.ping""#) } == [true])
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
        #expect(delegate.recorded.last == .closed(.failed(.timedOut(silence: .milliseconds(2500)))))
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

    @Test("each pong keeps its own bytes while an earlier one is still held by the channel")
    func pongsKeepTheirBytes() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        _ = try written(channel)
        // Each written out (the loop runs the drain), none read: the channel holds the first
        // pong when the second is made.
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.ping(id: "first").encode())
        channel.embeddedEventLoop.run()
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.ping(id: "second-and-longer").encode())
        channel.embeddedEventLoop.run()
        #expect(try written(channel) == [
            #"{"type":"peerkit.pong","replyTo":"first","payload":{}}"#,
            #"{"type":"peerkit.pong","replyTo":"second-and-longer","payload":{}}"#,
        ])
        // Read, the storage is free again: the next pong is right too.
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.ping(id: "third").encode())
        channel.embeddedEventLoop.run()
        #expect(try written(channel) == [#"{"type":"peerkit.pong","replyTo":"third","payload":{}}"#])
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
        #expect(delegate.recorded.last == .closed(.failed(.frameTooLarge(length: 4_294_967_295, limit: 256))))
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

    @Test("before the handshake only small frames are accepted; after it, the full limit")
    func handshakeFrameLimit() throws {
        let delegate = RecordingDelegate()
        let stranger = try makeChannel(delegate: delegate, limit: 1 << 20, handshakeLimit: 64)
        _ = try written(stranger)
        var big = ByteBuffer()
        big.writeInteger(UInt32(256 << 20))
        _ = try? stranger.writeInbound(big)
        stranger.embeddedEventLoop.run()
        #expect(try written(stranger) == [#"{"type":"peerkit.error","payload":{"reason":"Closing the connection: a frame of 268435456 bytes exceeds the 64-byte limit."}}"#])
        #expect(delegate.recorded == [.closed(.failed(.frameTooLarge(length: 268_435_456, limit: 64)))])

        let peerDelegate = RecordingDelegate()
        let peer = try makeChannel(delegate: peerDelegate, limit: 1 << 20, handshakeLimit: 512)
        try peer.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        let text = String(repeating: "x", count: 4000)
        try peer.writeInbound(ByteBuffer.frame(#"{"type":"Note","payload":{"text":"\#(text)"}}"#))
        #expect(peerDelegate.recorded == [.established(remote), .received("Note")])
        _ = try? peer.finish()

        // The hello and a large frame in one read: the hello raises the limit before the large
        // frame is checked (the decoder gathers the frames of a read only once the limit is final).
        let quickDelegate = RecordingDelegate()
        let quick = try makeChannel(delegate: quickDelegate, limit: 1 << 20, handshakeLimit: 512)
        var read = ConnectionStateMachine.ControlFrame.hello(remote).encode()
        read.writeImmutableBuffer(ByteBuffer.frame(#"{"type":"Note","payload":{"text":"\#(text)"}}"#))
        read.writeImmutableBuffer(ByteBuffer.frame(#"{"type":"Note","payload":{"text":"\#(text)"}}"#))
        try quick.writeInbound(read)
        #expect(quickDelegate.recorded == [.established(remote), .received("Note"), .received("Note")])
        _ = try? quick.finish()
    }

    @Test("reading pauses while a peer's messages wait for their handlers, and resumes once they are handled")
    func backpressure() throws {
        let delegate = RecordingDelegate()
        let (channel, connection) = try establishedChannel(delegate: delegate, inboundLimit: 1000)
        let note = ByteBuffer.frame(#"{"type":"Note","payload":{"text":"hello"}}"#)
        var costs: [Int] = []
        for _ in 0..<4 {
            try channel.writeInbound(note)
            costs.append(PeerConnectionHandler.perMessageOverhead + 4 + 16)
        }
        // Four messages of about 276 bytes: over the 1000-byte limit, so reads are held back.
        #expect(connection.isReadingPaused)
        let counter = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(counter, position: .first)
        channel.read()
        #expect(counter.reads == 0)
        // Handled down to half the limit: reading resumes, and the held-back read goes out.
        for cost in costs.prefix(3) { connection.inboundHandled(cost) }
        channel.embeddedEventLoop.run()
        #expect(!connection.isReadingPaused)
        #expect(counter.reads == 1)
        // A paused connection is not timed out: the peer is pinged every interval instead.
        _ = try written(channel)
        _ = connection.inboundAccepted(10_000)
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(channel.isActive)
        #expect(try written(channel).count == 20)
        _ = try? channel.finish()
    }

    @Test("the messages of one read are handed on together, in order, and a frame of another kind among them keeps its place")
    func oneHandOffPerRead() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        var read = ByteBuffer()
        for text in ["one", "two", "three"] { read.writeImmutableBuffer(ByteBuffer.frame(#"{"type":"Note","payload":{"text":"\#(text)"}}"#)) }
        read.writeImmutableBuffer(ConnectionStateMachine.ControlFrame.rename(name: "beta #2").encode())
        read.writeImmutableBuffer(ByteBuffer.frame(#"{"type":"Other","payload":{}}"#))
        try channel.writeInbound(read)
        #expect(delegate.recorded == [.established(remote), .received("Note"), .received("Note"), .received("Note"), .renamed("beta #2"), .received("Other")])
        // The three notes in one call, the rename after them, the last message when the read ended.
        #expect(delegate.messagesPerHandOff == [3, 1])
        _ = try? channel.finish()
    }

    @Test("the messages of one read are counted against the inbound limit together, before they are handed on, and reading pauses before the next read")
    func oneReadCountedTogether() throws {
        let delegate = RecordingDelegate()
        let (channel, connection) = try establishedChannel(delegate: delegate, inboundLimit: 1000)
        var read = ByteBuffer()
        for _ in 0..<4 { read.writeImmutableBuffer(ByteBuffer.frame(#"{"type":"Note","payload":{"text":"hello"}}"#)) }
        try channel.writeInbound(read)
        #expect(delegate.messagesPerHandOff == [4])
        // Four messages of about 276 bytes: over the 1000-byte limit once counted, which the
        // hand-off already sees (a handler may finish, and give its cost back, at once).
        #expect(delegate.pausedAtHandOff == [true])
        let counter = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(counter, position: .first)
        channel.read()
        #expect(counter.reads == 0, "the next read is held back")
        // The four costs were counted in full: two handled leave 552 bytes, over half the
        // limit; the third brings it to 276, and reading resumes.
        let cost = PeerConnectionHandler.perMessageOverhead + 4 + 16
        for _ in 0..<2 { connection.inboundHandled(cost) }
        #expect(connection.isReadingPaused)
        connection.inboundHandled(cost)
        channel.embeddedEventLoop.run()
        #expect(!connection.isReadingPaused)
        #expect(counter.reads == 1)
        _ = try? channel.finish()
    }

    @Test("messages the last read completed are handed on before the connection is reported closed")
    func handOffBeforeClose() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        // A frame with no read complete after it, as the frame reader's last decode passes
        // frames up when the channel goes inactive.
        let decoder = try channel.pipeline.syncOperations.context(handlerType: FrameReader.self)
        decoder.fireChannelRead(NIOAny(InboundFrame.frame(ByteBuffer(string: #"{"type":"Note","payload":{"text":"last"}}"#))))
        #expect(delegate.recorded == [.established(remote)])
        decoder.fireChannelInactive()
        #expect(delegate.recorded.prefix(2) == [.established(remote), .received("Note")])
        #expect(delegate.recorded.count == 3)
        _ = try? channel.finish()
    }

    @Test("a rename from the peer is reported with the new name")
    func rename() throws {
        let delegate = RecordingDelegate()
        let channel = try makeChannel(delegate: delegate)
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.hello(remote).encode())
        try channel.writeInbound(ConnectionStateMachine.ControlFrame.rename(name: "beta #2").encode())
        #expect(delegate.recorded == [.established(remote), .renamed("beta #2")])
        _ = try? channel.finish()
    }
}

/// Counts `read` calls that pass it on their way to the head of the pipeline.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    private(set) var reads = 0

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}
