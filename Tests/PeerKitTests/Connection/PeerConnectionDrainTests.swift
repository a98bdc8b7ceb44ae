import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

/// How a connection moves its outbox to the channel: a long backlog in turns, pings first.
@Suite("Draining the outbox")
struct PeerConnectionDrainTests {
    /// The lines written to `channel` so far, however the writes cut them (small frames of one
    /// drain go out as one buffer).
    static func lines(writtenTo channel: EmbeddedChannel) throws -> [String] {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text.split(separator: "\n").map(String.init)
    }

    /// A connection on an embedded channel, with the channel's loop; its outbox charged to `budget`.
    func embeddedConnection(budget: OutboundBudget, roomAvailable: (@Sendable () -> Void)? = nil) throws -> (EmbeddedChannel, EmbeddedEventLoop, PeerConnection) {
        let channel = EmbeddedChannel()
        let loop = try #require(channel.eventLoop as? EmbeddedEventLoop)
        return (channel, loop, PeerConnection(channel: channel, direction: .inbound, serviceKey: nil, outboundBudget: budget, roomAvailable: roomAvailable))
    }

    @Test("a long backlog is written a bounded number of frames per event-loop turn, and a ping overtakes the rest")
    func backlogIsWrittenInTurns() throws {
        let channel = EmbeddedChannel()
        let loop = try #require(channel.eventLoop as? EmbeddedEventLoop)
        let connection = PeerConnection(channel: channel, direction: .inbound, serviceKey: nil)
        let backlog = PeerConnection.framesPerDrain * 2 + 10
        for index in 0..<backlog {
            connection.send(ByteBuffer(string: "data \(index)\n"))
        }
        var written: [String] = []
        func collect() throws { written += try Self.lines(writtenTo: channel) }

        connection.drain()  // one turn, as the event loop would run it
        try collect()
        #expect(written.count == PeerConnection.framesPerDrain, "one turn writes a bounded number of frames")

        connection.send(ByteBuffer(string: "ping\n"), urgent: true)
        loop.run()  // the later turns
        try collect()
        #expect(written.count == backlog + 1)
        let ping = try #require(written.firstIndex(of: "ping"))
        #expect(ping == PeerConnection.framesPerDrain, "the ping goes first in the next turn, not behind the backlog")
        #expect(written.filter { $0 != "ping" } == (0..<backlog).map { "data \($0)" }, "data frames keep their order")
    }

    @Test("the small frames of one drain go out as one buffer, in order; a frame alone, and a large one, go out as they are")
    func smallFramesGoOutTogether() throws {
        let channel = EmbeddedChannel()
        let loop = try #require(channel.eventLoop as? EmbeddedEventLoop)
        let connection = PeerConnection(channel: channel, direction: .inbound, serviceKey: nil)
        func writes() throws -> [ByteBuffer] {
            var buffers: [ByteBuffer] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
            return buffers
        }

        let alone = ByteBuffer(string: "alone")
        connection.send(alone)
        loop.run()
        let first = try writes()
        #expect(first == [alone])
        let address = { (buffer: ByteBuffer) in buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } }
        #expect(first.first.map(address) == address(alone), "a frame alone is the caller's buffer, not a copy")

        let large = ByteBuffer(repeating: 0x6C, count: OutboundBatch.maximumFrameBytes + 1)
        for text in ["a", "b", "c"] { connection.send(ByteBuffer(string: text)) }
        connection.send(large)
        for text in ["d", "e"] { connection.send(ByteBuffer(string: text)) }
        connection.send(ByteBuffer(string: "p"), urgent: true)
        loop.run()
        #expect(try writes() == [ByteBuffer(string: "pabc"), large, ByteBuffer(string: "de")], "the urgent frame first, then the data in order")

        // A batch holds at most its capacity: a long run of small frames is cut into full ones.
        let frame = ByteBuffer(repeating: 0x61, count: OutboundBatch.maximumFrameBytes)
        let count = OutboundBatch.capacity / frame.readableBytes + 3
        for _ in 0..<count { connection.send(frame) }
        loop.run()
        let batches = try writes()
        #expect(batches.map(\.readableBytes) == [OutboundBatch.capacity, 3 * frame.readableBytes])
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
        func collect() throws { written += try Self.lines(writtenTo: channel) }

        // Writable: a pong goes out at once, before queued data.
        connection.send(ByteBuffer(string: "data\n"))
        connection.sendPong(ByteBuffer(string: "pong 0\n"))
        loop.run()
        try collect()
        #expect(written == ["pong 0", "data"])

        // Not writable (the peer does not read): a thousand pings answered hold one pong, the
        // latest; our own ping still goes out.
        written = []
        channel.isWritable = false
        for index in 1...1000 { connection.sendPong(ByteBuffer(string: "pong \(index)\n")) }
        connection.send(ByteBuffer(string: "ping\n"), urgent: true)
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
        connection.sendPong(ByteBuffer(string: "pong 1001\n"))
        connection.ended(error: nil)
        channel.isWritable = true
        connection.writabilityChanged(isWritable: true)
        loop.run()
        try collect()
        #expect(written == ["ping", "pong 1000"])
    }

    @Test("the outbox counts each frame's bytes and its overhead, on its own and in the transceiver's budget, and gives both back when written or dropped")
    func outboxCountsCostInTheBudget() throws {
        let budget = OutboundBudget(limit: 1 << 20)
        let (channel, loop, connection) = try embeddedConnection(budget: budget)
        let (_, _, other) = try embeddedConnection(budget: budget)
        channel.isWritable = false
        for _ in 0..<10 { connection.send(ByteBuffer(repeating: 0x61, count: 100)) }
        other.send(ByteBuffer(repeating: 0x62, count: 40))
        let cost = 100 + PeerConnection.perFrameOverhead
        #expect(connection.queuedOutboundBytes == 10 * cost, "ten frames of 100 bytes, each with its overhead")
        #expect(budget.total == 10 * cost + 40 + PeerConnection.perFrameOverhead, "the budget counts both connections")

        channel.isWritable = true
        connection.writabilityChanged(isWritable: true)
        loop.run()
        #expect(connection.queuedOutboundBytes == 0)
        #expect(budget.total == 40 + PeerConnection.perFrameOverhead, "written: off the budget")
        other.ended(error: nil)
        #expect(budget.total == 0, "dropped with its connection: off the budget")
    }

    @Test("a broadcast's frame (one buffer in every peer's outbox) and a session's frames (charged by the session that keeps them) count against the peer's limit, and the outbox charges neither to the budget")
    func sharedAndSessionFramesAreNotChargedByTheOutbox() throws {
        let budget = OutboundBudget(limit: 1 << 20)
        let (channel, loop, connection) = try embeddedConnection(budget: budget)
        let frame = ByteBuffer(repeating: 0x61, count: 100)
        let cost = PeerConnection.queuedCost(of: frame)
        channel.isWritable = false
        #expect(connection.enqueue(frame, below: nil, shared: true) == .queued)
        let appended = connection.appendInOrder([frame, frame])
        connection.finishAppend(appended)
        #expect(appended.bytes == 2 * cost && appended.charged == 0)
        #expect(connection.queuedOutboundBytes == 3 * cost, "the peer's own limit counts every frame")
        #expect(connection.chargedOutboundBytes == 0 && budget.total == 0, "nothing is charged by the outbox")
        #expect(connection.enqueue(frame, below: nil) == .queued)
        #expect(connection.chargedOutboundBytes == cost && budget.total == cost, "a frame made for this peer alone, kept by no session, is")

        channel.isWritable = true
        connection.writabilityChanged(isWritable: true)
        loop.run()
        #expect(connection.queuedOutboundBytes == 0 && connection.chargedOutboundBytes == 0 && budget.total == 0)
    }

    @Test("what the peer holds of the budget through its connection counts the session's share, written or not")
    func heldOfTheBudgetCountsTheSessionsShare() throws {
        let budget = OutboundBudget(limit: 1 << 20)
        let (channel, _, connection) = try embeddedConnection(budget: budget)
        let share = OutboundBudget.Share(budget: budget)
        channel.isWritable = false
        #expect(connection.enqueue(ByteBuffer(repeating: 0x61, count: 100), below: nil) == .queued)
        let outbox = 100 + PeerConnection.perFrameOverhead
        #expect(connection.heldOfOutboundBudget == outbox)
        share.added(5000)
        #expect(connection.heldOfOutboundBudget == outbox, "the share counts once the connection carries the session")
        connection.setSessionShare(share)
        #expect(connection.heldOfOutboundBudget == outbox + 5000)
        #expect(budget.total == outbox + 5000)
    }

    @Test("while the transceiver's budget is spent, a connection whose outbox empties says so (its peer's handlers may run), and so does the budget once it has room")
    func roomWhileTheBudgetIsSpent() throws {
        let frame = ByteBuffer(repeating: 0x61, count: 1000)
        let budget = OutboundBudget(limit: 2 * PeerConnection.queuedCost(of: frame))
        let rooms = NIOLockedValueBox(0)
        let (channel, loop, connection) = try embeddedConnection(budget: budget) { rooms.withLockedValue { $0 += 1 } }
        let (hogChannel, _, hog) = try embeddedConnection(budget: budget) { rooms.withLockedValue { $0 += 1 } }
        // The hog's peer never reads: its two frames spend the budget.
        hogChannel.isWritable = false
        hog.send(frame)
        hog.send(frame)
        #expect(budget.isSpent)

        channel.isWritable = false
        connection.send(frame)
        channel.isWritable = true
        connection.writabilityChanged(isWritable: true)
        loop.run()
        #expect(connection.queuedOutboundBytes == 0)
        #expect(budget.isSpent, "the hog still holds the budget")
        #expect(rooms.withLockedValue { $0 } >= 1, "the emptied outbox said so, although the budget is still spent")

        rooms.withLockedValue { $0 = 0 }
        hog.ended(error: nil)
        #expect(!budget.isSpent)
        #expect(rooms.withLockedValue { $0 } == 1, "the budget's room said so once")
    }
}
