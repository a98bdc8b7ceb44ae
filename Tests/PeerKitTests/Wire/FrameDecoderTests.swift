import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing
@testable import PeerKit

@Suite("Frame decoding")
struct FrameDecoderTests {
    @Test("frames split across and joined within reads are decoded (ByteToMessageDecoderVerifier)")
    func verifier() throws {
        let bodies = [#"{"type":"a","payload":{}}"#, "", #"{"type":"b","payload":[1,2,3]}"#]
        var input = ByteBuffer()
        for body in bodies { input.writeImmutableBuffer(.frame(body)) }
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [(input, bodies.map { .frame(ByteBuffer(string: $0)) })],
            decoderFactory: { FrameDecoder(maximumFrameLength: 1024) }
        )
    }

    @Test("a 4 GiB length is refused after reading only its length field")
    func hugeLength() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 16 * 1024 * 1024)))
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32.max)
        buffer.writeString("{")
        #expect(throws: WireError.frameTooLarge(length: Int(UInt32.max), limit: 16 * 1024 * 1024)) {
            try channel.writeInbound(buffer)
        }
        _ = try? channel.finish()
    }

    @Test("a frame one byte over the limit is refused; one at the limit is accepted")
    func limitBoundary() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 8)))
        try channel.writeInbound(ByteBuffer.frame("12345678"))
        #expect(try channel.readInbound(as: InboundFrame.self) == .frame(ByteBuffer(string: "12345678")))
        #expect(throws: WireError.frameTooLarge(length: 9, limit: 8)) {
            try channel.writeInbound(ByteBuffer.frame("123456789"))
        }
        _ = try? channel.finish()
    }

    @Test("once the limit is final, the whole frames of one read go up together, and a chunk's piece after them keeps its place; before, each goes up alone")
    func wholeFramesOfAReadGoUpTogether() throws {
        var read = ByteBuffer()
        for body in ["a", "b", "c"] { read.writeImmutableBuffer(.frame(body)) }
        read.writeImmutableBuffer(ResourceChunkFrame.encode(transfer: 4, data: ByteBuffer(bytes: [1, 2])))
        for body in ["d", "e"] { read.writeImmutableBuffer(.frame(body)) }
        read.writeImmutableBuffer(.frame("f"))

        let final = EmbeddedChannel(handler: FrameReader(FrameDecoder(limit: FrameLengthLimit(1024, isFinal: true))))
        try final.writeInbound(read)
        var outputs: [InboundFrame] = []
        while let output = try final.readInbound(as: InboundFrame.self) { outputs.append(output) }
        let chunk = InboundFrame.chunk(ResourceChunk(transfer: 4, data: ByteBuffer(bytes: [1, 2])), framingBytes: 4 + ResourceChunkFrame.headerLength)
        #expect(outputs == [.frames(["a", "b", "c"].map { ByteBuffer(string: $0) }), chunk, .frames(["d", "e", "f"].map { ByteBuffer(string: $0) })])
        // A frame alone in its read goes up alone.
        try final.writeInbound(ByteBuffer.frame("g"))
        #expect(try final.readInbound(as: InboundFrame.self) == .frame(ByteBuffer(string: "g")))
        #expect(try final.finish().isClean)

        let handshaking = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 1024)))
        try handshaking.writeInbound(read)
        outputs = []
        while let output = try handshaking.readInbound(as: InboundFrame.self) { outputs.append(output) }
        #expect(outputs == ["a", "b", "c"].map { .frame(ByteBuffer(string: $0)) } + [chunk] + ["d", "e", "f"].map { .frame(ByteBuffer(string: $0)) })
        #expect(try handshaking.finish().isClean)
    }

    @Test("a read of many tiny frames goes up in batches of at most maximumFramesTogether, in order")
    func batchesAreBounded() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(limit: FrameLengthLimit(64, isFinal: true))))
        let count = FrameDecoder.maximumFramesTogether * 3 + 7
        var read = ByteBuffer()
        for index in 0..<count { read.writeImmutableBuffer(.frame("\(index)")) }
        try channel.writeInbound(read)
        var sizes: [Int] = []
        var bodies: [String] = []
        while let output = try channel.readInbound(as: InboundFrame.self) {
            guard case let .frames(frames) = output else {
                Issue.record("expected frames together, not \(output)")
                break
            }
            sizes.append(frames.count)
            bodies += frames.map { String(buffer: $0) }
        }
        #expect(sizes.allSatisfy { $0 <= FrameDecoder.maximumFramesTogether })
        #expect(sizes.count == 4)
        #expect(bodies == (0..<count).map { "\($0)" })
        #expect(try channel.finish().isClean)
    }

    @Test("an oversized frame behind whole ones in a read: the whole ones go up, then the error")
    func wholeFramesBeforeAnOversizedOne() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(limit: FrameLengthLimit(64, isFinal: true))))
        var read = ByteBuffer()
        for body in ["a", "b"] { read.writeImmutableBuffer(.frame(body)) }
        read.writeInteger(UInt32(1000))
        #expect(throws: WireError.frameTooLarge(length: 1000, limit: 64)) {
            try channel.writeInbound(read)
        }
        #expect(try channel.readInbound(as: InboundFrame.self) == .frames([ByteBuffer(string: "a"), ByteBuffer(string: "b")]))
        _ = try? channel.finish()
    }

    @Test("a stream that ends inside a frame reports a truncated frame")
    func truncated() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 1024)))
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(10))
        buffer.writeString("abc")
        try channel.writeInbound(buffer)
        #expect(throws: WireError.truncatedFrame(bytesLeft: 3)) {
            try channel.finish()
        }
    }

    // MARK: Binary chunk frames

    /// What a sequence of inbound frames should come out as: whole envelopes, and each chunk
    /// frame's transfer and data (however it was split into pieces).
    enum Expected: Equatable {
        case frame(String)
        case chunk(transfer: UInt32, data: [UInt8])
    }

    /// Feeds `stream` to a decoder in reads of the given lengths and joins the pieces of each
    /// chunk frame back together; also returns the framing bytes counted. `limitIsFinal`: the
    /// decoder's limit is final (as after the handshake), so whole frames of a read go up together.
    func decode(_ stream: ByteBuffer, readLengths: [Int], limitIsFinal: Bool = false) throws -> (frames: [Expected], framingBytes: Int, pieces: Int) {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(limit: FrameLengthLimit(1 << 20, isFinal: limitIsFinal))))
        var rest = stream
        var lengths = readLengths.makeIterator()
        while rest.readableBytes > 0 {
            let length = min(rest.readableBytes, max(1, lengths.next() ?? rest.readableBytes))
            if let read = rest.readSlice(length: length) {
                // A fresh buffer per read, as a socket read gives one.
                try channel.writeInbound(ByteBuffer(bytes: read.readableBytesView))
            }
        }
        var frames: [Expected] = []
        var framing = 0
        var pieces = 0
        var open: (transfer: UInt32, data: [UInt8])?
        while let next = try channel.readInbound(as: InboundFrame.self) {
            switch next {
            case let .frame(body):
                // The chunk frame before it, if any, is complete.
                if let done = open { frames.append(.chunk(transfer: done.transfer, data: done.data)) }
                open = nil
                frames.append(.frame(String(buffer: body)))
            case let .frames(bodies):
                #expect(limitIsFinal, "frames go up together only once the limit is final")
                #expect(bodies.count >= 2)
                if let done = open { frames.append(.chunk(transfer: done.transfer, data: done.data)) }
                open = nil
                frames += bodies.map { .frame(String(buffer: $0)) }
            case let .chunk(chunk, framingBytes):
                pieces += 1
                framing += framingBytes
                if framingBytes > 0 {
                    // A new frame starts: the previous one is complete.
                    if let done = open { frames.append(.chunk(transfer: done.transfer, data: done.data)) }
                    open = (chunk.transfer, [])
                }
                #expect(open?.transfer == chunk.transfer)
                open?.data += Array(chunk.data.readableBytesView)
            }
        }
        if let done = open { frames.append(.chunk(transfer: done.transfer, data: done.data)) }
        #expect(try channel.finish().isClean)
        return (frames, framing, pieces)
    }

    @Test("a chunk frame's data comes out in pieces that add up to it, however the reads split it", arguments: [1, 2, 5, 9, 10, 333, 4096, 1 << 20], [false, true])
    func chunkPieces(readLength: Int, limitIsFinal: Bool) throws {
        let data = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var stream = ByteBuffer.frame(#"{"type":"before","payload":{}}"#)
        stream.writeImmutableBuffer(ResourceChunkFrame.encode(transfer: 9, data: ByteBuffer(bytes: data)))
        stream.writeImmutableBuffer(ResourceChunkFrame.encode(transfer: 10, data: ByteBuffer()))
        stream.writeImmutableBuffer(.frame(#"{"type":"after","payload":{}}"#))
        stream.writeImmutableBuffer(ResourceChunkFrame.encode(transfer: 9, data: ByteBuffer(bytes: [1, 2, 3])))
        let (frames, framing, pieces) = try decode(stream, readLengths: Array(repeating: readLength, count: 20_000), limitIsFinal: limitIsFinal)
        #expect(frames == [
            .frame(#"{"type":"before","payload":{}}"#), .chunk(transfer: 9, data: data), .chunk(transfer: 10, data: []),
            .frame(#"{"type":"after","payload":{}}"#), .chunk(transfer: 9, data: [1, 2, 3]),
        ])
        #expect(framing == 3 * (4 + ResourceChunkFrame.headerLength))
        #expect(pieces >= 3)
    }

    @Test("random streams of envelopes and chunk frames cut at random places decode the same, whole frames gathered or not", arguments: [false, true])
    func randomSplits(limitIsFinal: Bool) throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var stream = ByteBuffer()
            var expected: [Expected] = []
            for index in 0..<Int.random(in: 1...12, using: &generator) {
                if Bool.random(using: &generator) {
                    let json = #"{"type":"m\#(index)","payload":"\#(String(repeating: "x", count: Int.random(in: 0...300, using: &generator)))"}"#
                    stream.writeImmutableBuffer(.frame(json))
                    expected.append(.frame(json))
                } else {
                    let data = (0..<Int.random(in: 0...5000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                    let transfer = UInt32.random(in: 0...UInt32.max, using: &generator)
                    stream.writeImmutableBuffer(ResourceChunkFrame.encode(transfer: transfer, data: ByteBuffer(bytes: data)))
                    expected.append(.chunk(transfer: transfer, data: data))
                }
            }
            let reads = (0..<2000).map { _ in Int.random(in: 1...700, using: &generator) }
            #expect(try decode(stream, readLengths: reads, limitIsFinal: limitIsFinal).frames == expected)
        }
    }

    @Test("a large piece is a slice of the read (no copy); a short one is copied so it does not keep the read's buffer alive")
    func pieceStorage() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 1 << 20)))
        // One read: a whole 60,000-byte chunk frame, then the first 100 bytes of another.
        var read = ByteBufferAllocator().buffer(capacity: 65_536)
        read.writeImmutableBuffer(ResourceChunkFrame.encode(transfer: 1, data: ByteBuffer(repeating: 7, count: 60_000)))
        var second = ResourceChunkFrame.encode(transfer: 2, data: ByteBuffer(repeating: 8, count: 1000))
        if let head = second.readSlice(length: 4 + ResourceChunkFrame.headerLength + 100) { read.writeImmutableBuffer(head) }
        let range = read.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress)..<(UInt(bitPattern: $0.baseAddress) + UInt($0.count)) }
        try channel.writeInbound(read)
        func address(_ frame: InboundFrame?) -> UInt? {
            guard case let .chunk(chunk, _) = frame else { return nil }
            return chunk.data.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        }
        let large = try channel.readInbound(as: InboundFrame.self)
        let short = try channel.readInbound(as: InboundFrame.self)
        #expect(address(large).map(range.contains) == true)
        #expect(address(short).map(range.contains) == false)
        guard case let .chunk(tail, 9) = short else {
            Issue.record("expected the second frame's first piece, not \(String(describing: short))")
            return
        }
        #expect(tail.transfer == 2 && tail.data == ByteBuffer(repeating: 8, count: 100))
        _ = try? channel.finish()
    }

    @Test("a stream that ends inside a chunk frame's data reports a truncated frame")
    func truncatedChunk() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 1024)))
        var frame = ResourceChunkFrame.encode(transfer: 3, data: ByteBuffer(repeating: 1, count: 100))
        if let head = frame.readSlice(length: 50) { try channel.writeInbound(head) }
        #expect(throws: WireError.truncatedFrame(bytesLeft: 0)) {
            try channel.finish()
        }
    }

    @Test("a binary frame too short for a chunk header comes up whole, for the connection to refuse")
    func shortBinaryFrame() throws {
        let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(maximumFrameLength: 1024)))
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(3))
        buffer.writeBytes([0, 1, 2])
        try channel.writeInbound(buffer)
        #expect(try channel.readInbound(as: InboundFrame.self) == .frame(ByteBuffer(bytes: [0, 1, 2])))
        _ = try? channel.finish()
    }
}
