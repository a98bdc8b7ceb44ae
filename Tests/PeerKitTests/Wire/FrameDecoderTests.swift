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
            inputOutputPairs: [(input, bodies.map { ByteBuffer(string: $0) })],
            decoderFactory: { FrameDecoder(maximumFrameLength: 1024) }
        )
    }

    @Test("a 4 GiB length is refused after reading only its length field")
    func hugeLength() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameLength: 16 * 1024 * 1024)))
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
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameLength: 8)))
        try channel.writeInbound(ByteBuffer.frame("12345678"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "12345678"))
        #expect(throws: WireError.frameTooLarge(length: 9, limit: 8)) {
            try channel.writeInbound(ByteBuffer.frame("123456789"))
        }
        _ = try? channel.finish()
    }

    @Test("a stream that ends inside a frame reports a truncated frame")
    func truncated() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameLength: 1024)))
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(10))
        buffer.writeString("abc")
        try channel.writeInbound(buffer)
        #expect(throws: WireError.truncatedFrame(bytesLeft: 3)) {
            try channel.finish()
        }
    }
}
