import NIOCore
import NIOEmbedded
import Testing
@testable import PeerKit

/// What ``FrameReader`` does besides handing reads to ``FrameDecoder`` (whose splitting
/// `FrameDecoderTests` covers, through this handler): what it does when a frame is refused, when
/// the channel closes in the middle of a read, and when a read is passed in while one is decoded.
@Suite("Frame reading")
struct FrameReaderTests {
    /// Records what comes up the pipeline; `onFrame` runs for each frame, as it arrives.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = InboundFrame

        var frames: [String] = []
        var errors: [any Error] = []
        var inactive = 0
        let onFrame: (String, ChannelHandlerContext) -> Void

        init(onFrame: @escaping (String, ChannelHandlerContext) -> Void = { _, _ in }) {
            self.onFrame = onFrame
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case let .frame(body):
                record(body, context: context)
            case let .frames(bodies):
                for body in bodies { record(body, context: context) }
            case .chunk:
                Issue.record("no chunk frame was sent")
            }
        }

        private func record(_ body: ByteBuffer, context: ChannelHandlerContext) {
            frames.append(String(buffer: body))
            onFrame(String(buffer: body), context)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            errors.append(error)
        }

        func channelInactive(context: ChannelHandlerContext) {
            inactive += 1
        }
    }

    func channel(_ recorder: Recorder, limit: Int = 1024, isFinal: Bool = false) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(FrameReader(FrameDecoder(limit: FrameLengthLimit(limit, isFinal: isFinal))))
        try channel.pipeline.syncOperations.addHandler(recorder)
        return channel
    }

    func read(_ bodies: [String], then tail: ByteBuffer = ByteBuffer()) -> ByteBuffer {
        var read = ByteBuffer()
        for body in bodies { read.writeImmutableBuffer(.frame(body)) }
        read.writeImmutableBuffer(tail)
        return read
    }

    @Test("a frame cut across reads comes up once its last byte arrives", arguments: [false, true])
    func frameAcrossReads(limitIsFinal: Bool) throws {
        let recorder = Recorder()
        let channel = try channel(recorder, isFinal: limitIsFinal)
        var stream = read(["first", "second", "third"])
        // "first" whole and 3 bytes of "second"'s length; then a byte at a time; then the rest.
        if let head = stream.readSlice(length: 9 + 3) { try channel.writeInbound(head) }
        #expect(recorder.frames == ["first"])
        for _ in 0..<4 { if let byte = stream.readSlice(length: 1) { try channel.writeInbound(byte) } }
        #expect(recorder.frames == ["first"])
        try channel.writeInbound(stream)
        #expect(recorder.frames == ["first", "second", "third"])
        #expect(try channel.finish().isClean)
        #expect(recorder.errors.isEmpty && recorder.inactive == 1)
    }

    @Test("after a frame above the limit, the error goes up once and the rest of the stream is dropped")
    func refusedThenDropped() throws {
        let recorder = Recorder()
        let channel = try channel(recorder, limit: 16)
        var oversized = ByteBuffer()
        oversized.writeInteger(UInt32(17))
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(read(["a"], then: oversized)))
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(read(["b", "c"])))
        channel.pipeline.syncOperations.fireChannelInactive()
        #expect(recorder.frames == ["a"])
        #expect(recorder.errors.map { $0 as? WireError } == [.frameTooLarge(length: 17, limit: 16)])
        #expect(recorder.inactive == 1)
    }

    @Test("the channel closed over a frame: the rest of that read does not come up, and no truncation is reported", arguments: [false, true])
    func closedWhileDecoding(limitIsFinal: Bool) throws {
        let recorder = Recorder { body, context in
            if body == "bad" { context.close(promise: nil) }
        }
        let channel = try channel(recorder, isFinal: limitIsFinal)
        // The stream goes on after "bad", and ends inside a frame.
        var cut = ByteBuffer()
        cut.writeInteger(UInt32(100))
        try channel.writeInbound(read(limitIsFinal ? ["bad", "after"] : ["ok", "bad", "after"], then: cut))
        #expect(recorder.frames == (limitIsFinal ? ["bad", "after"] : ["ok", "bad"]),
                "frames of a batch already up are the handler's to drop; the decoder passes up no more")
        #expect(recorder.errors.isEmpty)
        #expect(recorder.inactive == 1)
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(read(["later"])))
        #expect(!recorder.frames.contains("later"))
    }

    @Test("a read passed in while one is decoded is decoded after it, in order")
    func reentrantRead() throws {
        var passedIn = false
        let recorder = Recorder { body, context in
            guard body == "a", !passedIn else { return }
            passedIn = true
            // From the head of the pipeline, as a read would come: the frame reader is decoding.
            context.pipeline.syncOperations.fireChannelRead(NIOAny(ByteBuffer.frame("c")))
        }
        let channel = try channel(recorder)
        try channel.writeInbound(read(["a", "b"]))
        #expect(recorder.frames == ["a", "b", "c"])
        #expect(try channel.finish().isClean)
    }

    @Test("the input closing decodes what is left: a frame cut short is reported before the channel is")
    func inputClosed() throws {
        let recorder = Recorder()
        let channel = try channel(recorder)
        var cut = ByteBuffer()
        cut.writeInteger(UInt32(10))
        cut.writeString("abc")
        try channel.writeInbound(read(["whole"], then: cut))
        channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(recorder.frames == ["whole"])
        #expect(recorder.errors.map { $0 as? WireError } == [.truncatedFrame(bytesLeft: 3)])
        // Decoded once: closing the channel after reports nothing more.
        channel.pipeline.syncOperations.fireChannelInactive()
        #expect(recorder.errors.count == 1 && recorder.inactive == 1)
    }
}
