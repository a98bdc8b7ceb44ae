import NIOCore
import NIOEmbedded
@testable import PeerKit

/// The frame reader (`FrameReader` running `FrameDecoder`, as every connection's pipeline does)
/// and the envelope parser behind it, fed the fuzz input as a byte stream cut into
/// chunks whose sizes come from the input itself (a frame split anywhere must decode the same).
///
/// Input: byte 0 picks the chunk size (1...256), the rest is the stream. The stream is decoded
/// twice: with the limit of a handshake (each frame goes up alone) and with a final one (the whole
/// frames of a read go up together). Checks: no crash, every frame and chunk piece handed on is
/// within the limit, every frame parses as the general scan parses it (pings and pongs take a
/// shortcut), frames go up together only with a final limit and at most
/// `FrameDecoder.maximumFramesTogether` at a time, and the decoder either consumes the whole
/// stream or reports a WireError.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrameDecoder(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start, count > 0 else { return 0 }
    let input = UnsafeBufferPointer(start: start, count: count)
    decode(input, limitIsFinal: false)
    decode(input, limitIsFinal: true)
    return 0
}

private func decode(_ input: UnsafeBufferPointer<UInt8>, limitIsFinal: Bool) {
    let chunkSize = Int(input[0]) + 1
    let stream = input.dropFirst()
    let limit = 4096
    let channel = EmbeddedChannel(handler: FrameReader(FrameDecoder(limit: FrameLengthLimit(limit, isFinal: limitIsFinal))))
    defer { _ = try? channel.finish() }
    func check(_ frame: ByteBuffer) {
        precondition(frame.readableBytes <= limit, "a frame of \(frame.readableBytes) bytes passed the \(limit)-byte limit")
        // The heartbeat's shortcut gives what the general scan gives, or leaves the frame to it.
        let parsed = Result { () throws(WireError) in try EnvelopeParser.parse(frame) }
        let scanned = Result { () throws(WireError) in try EnvelopeParser.scanned(frame) }
        precondition(parsed == scanned, "the envelope parser read \(String(buffer: frame).debugDescription) as \(parsed), its general scan as \(scanned)")
    }
    var offset = stream.startIndex
    do {
        while offset < stream.endIndex {
            let end = min(offset + chunkSize, stream.endIndex)
            var chunk = channel.allocator.buffer(capacity: end - offset)
            chunk.writeBytes(UnsafeBufferPointer(rebasing: input[offset..<end]))
            try channel.writeInbound(chunk)
            offset = end
            while let next = try channel.readInbound(as: InboundFrame.self) {
                switch next {
                case let .frame(frame):
                    check(frame)
                case let .frames(frames):
                    precondition(limitIsFinal, "frames went up together before the limit was final")
                    precondition((2...FrameDecoder.maximumFramesTogether).contains(frames.count), "\(frames.count) frames went up together")
                    frames.forEach(check)
                case let .chunk(chunk, framingBytes):
                    precondition(chunk.data.readableBytes <= limit - ResourceChunkFrame.headerLength, "a chunk piece of \(chunk.data.readableBytes) bytes passed the \(limit)-byte limit")
                    precondition(framingBytes == 0 || framingBytes == 4 + ResourceChunkFrame.headerLength, "a chunk piece counted \(framingBytes) framing bytes")
                }
            }
        }
        _ = try channel.finish()
    } catch is WireError {
        // Refused: too large, or truncated at the end.
    } catch {
        preconditionFailure("the frame decoder threw \(error), which is not a WireError")
    }
}
