import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

/// How a connection moves its outbox to the channel: a long backlog in turns, pings first.
@Suite("Draining the outbox")
struct PeerConnectionDrainTests {
    @Test("a long backlog is written a bounded number of frames per event-loop turn, and a ping overtakes the rest")
    func backlogIsWrittenInTurns() throws {
        let channel = EmbeddedChannel()
        let loop = try #require(channel.eventLoop as? EmbeddedEventLoop)
        let connection = PeerConnection(channel: channel, direction: .inbound, serviceKey: nil)
        let backlog = PeerConnection.framesPerDrain * 2 + 10
        for index in 0..<backlog {
            connection.send(ByteBuffer(string: "data \(index)"))
        }
        var written: [String] = []
        func collect() throws {
            while let frame = try channel.readOutbound(as: ByteBuffer.self) { written.append(String(buffer: frame)) }
        }

        connection.drain()  // one turn, as the event loop would run it
        try collect()
        #expect(written.count == PeerConnection.framesPerDrain, "one turn writes a bounded number of frames")

        connection.send(ByteBuffer(string: "ping"), urgent: true)
        loop.run()  // the later turns
        try collect()
        #expect(written.count == backlog + 1)
        let ping = try #require(written.firstIndex(of: "ping"))
        #expect(ping == PeerConnection.framesPerDrain, "the ping goes first in the next turn, not behind the backlog")
        #expect(written.filter { $0 != "ping" } == (0..<backlog).map { "data \($0)" }, "data frames keep their order")
    }

    @Test("a resource chunk goes out as its head and then its data, untouched, and only once no other frame waits")
    func bulkChunkIsHeadThenData() async throws {
        let channel = EmbeddedChannel()
        let loop = try #require(channel.eventLoop as? EmbeddedEventLoop)
        let connection = PeerConnection(channel: channel, direction: .inbound, serviceKey: nil)
        let data = ByteBuffer(repeating: 0x61, count: 1000)
        connection.send(ByteBuffer(string: "message"))
        try await connection.sendBulk(ResourceChunkFrame.head(transfer: 7, dataLength: data.readableBytes), data: data)
        loop.run()
        var written: [ByteBuffer] = []
        while let frame = try channel.readOutbound(as: ByteBuffer.self) { written.append(frame) }
        #expect(written.count == 3)
        #expect(written.first == ByteBuffer(string: "message"), "the message waited for no chunk")
        var wire = ByteBuffer()
        for part in written.dropFirst() { wire.writeImmutableBuffer(part) }
        #expect(wire == ResourceChunkFrame.encode(transfer: 7, data: data), "head and data make the chunk frame")
        #expect(written.last == data)
    }

    @Test("only the latest pong waits, and only for a writable channel: a peer that pings without reading makes us hold one pong, not one per ping")
    func onlyTheLatestPongWaits() throws {
        let channel = EmbeddedChannel()
        let loop = try #require(channel.eventLoop as? EmbeddedEventLoop)
        let connection = PeerConnection(channel: channel, direction: .inbound, serviceKey: nil)
        var written: [String] = []
        func collect() throws {
            while let frame = try channel.readOutbound(as: ByteBuffer.self) { written.append(String(buffer: frame)) }
        }

        // Writable: a pong goes out at once, before queued data.
        connection.send(ByteBuffer(string: "data"))
        connection.sendPong(ByteBuffer(string: "pong 0"))
        loop.run()
        try collect()
        #expect(written == ["pong 0", "data"])

        // Not writable (the peer does not read): a thousand pings answered hold one pong, the
        // latest; our own ping still goes out.
        written = []
        channel.isWritable = false
        for index in 1...1000 { connection.sendPong(ByteBuffer(string: "pong \(index)")) }
        connection.send(ByteBuffer(string: "ping"), urgent: true)
        loop.run()
        try collect()
        #expect(written == ["ping"])

        // Writable again: the latest pong, once.
        channel.isWritable = true
        connection.writabilityChanged(isWritable: true)
        loop.run()
        try collect()
        #expect(written == ["ping", "pong 1000"])

        // A closed connection holds none.
        channel.isWritable = false
        connection.sendPong(ByteBuffer(string: "pong 1001"))
        connection.ended(error: nil)
        channel.isWritable = true
        connection.writabilityChanged(isWritable: true)
        loop.run()
        try collect()
        #expect(written == ["ping", "pong 1000"])
    }
}
