import NIOCore

/// The handler that reads frames in every connection's pipeline: it keeps the bytes of a frame
/// still arriving until the rest comes, and hands each read to ``FrameDecoder``, which splits it.
///
/// NIO's `ByteToMessageHandler` does the same for any `ByteToMessageDecoder`, and did it here
/// until 2026-12-07. It is generic and compiled once, in NIO, for every decoder: each read paid for
/// looking up the handler's type metadata and witness tables, casting the read buffer out of
/// `NIOAny` through the runtime, and moving the decoder out of the handler and back. That was
/// 5 % of an idle mesh's CPU, more than ``FrameDecoder`` itself, and 3–4 % of each side's in a
/// request/reply (Documentation/Performance.md, "frames read without NIO's generic decoder
/// handler"). This handler does the same work for the one decoder PeerKit has, compiled with it.
///
/// What it keeps of `ByteToMessageHandler`'s behaviour:
/// - Bytes left after a read's whole frames wait for the next read, which is appended to them.
///   A buffer mostly read is compacted first, by `ByteToMessageDecoder`'s rule.
/// - When the channel closes, or its input does, the bytes left are decoded one last time
///   (``FrameDecoder/decodeLast(context:buffer:seenEOF:)``) before the event goes on: a frame cut
///   short is passed on as ``WireError/truncatedFrame(bytesLeft:)``.
/// - After the decoder throws (a frame above the limit), the error is passed on and the rest of
///   the stream is dropped: the connection handler closes the connection.
/// - A read passed in while one is being decoded (re-entered from up the pipeline) is decoded
///   after it, in order. If the channel closes meanwhile (the connection handler closed it over
///   a frame of this read), the rest of the read is dropped: nothing up the pipeline takes frames
///   of a closed connection.
final class FrameReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = InboundFrame

    private var decoder: FrameDecoder
    /// What the reads so far left undecoded: the start of a frame still arriving (and, while a
    /// read is decoded, reads passed in meanwhile). nil when nothing is left.
    private var unread: ByteBuffer?
    private var state = State.reading

    private enum State {
        /// Waiting for the next read.
        case reading
        /// Decoding a read. `inputEnded`: the channel or its input closed meanwhile.
        case decoding(inputEnded: Bool)
        /// The input ended and its last bytes were decoded, or the decoder threw: nothing more
        /// is decoded.
        case done
    }

    /// A handler that reads frames with `decoder`.
    init(_ decoder: FrameDecoder) {
        self.decoder = decoder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var read = unwrapInboundIn(data)
        switch state {
        case .reading:
            if var unread = unread.take() {
                unread.writeBuffer(&read)
                read = unread
            }
            decode(&read, context: context)
        case .decoding:
            // Re-entered: the decoding under way takes it next.
            keepUnread(&read)
        case .done:
            return
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        inputEnded(context: context)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed? = event as? ChannelEvent {
            inputEnded(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Decodes `buffer` and what joins it meanwhile until the decoder needs more bytes, and keeps
    /// what is left for the next read.
    private func decode(_ buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        state = .decoding(inputEnded: false)
        do {
            while case .decoding(inputEnded: false) = state {
                guard case .needMoreData = try decoder.decode(context: context, buffer: &buffer) else { continue }
                guard var joined = unread.take() else { break }
                buffer.writeBuffer(&joined)
            }
        } catch {
            fail(error, context: context)
            return
        }
        if case .decoding(inputEnded: true) = state {
            unread = nil
            state = .done
            return
        }
        state = .reading
        if buffer.readableBytes > 0 {
            if decoder.shouldReclaimBytes(buffer: buffer) { buffer.discardReadBytes() }
            unread = buffer
        }
    }

    /// The channel or its input closed: decode what is left one last time, unless a read is being
    /// decoded (it stops and drops the rest) or decoding ended already.
    private func inputEnded(context: ChannelHandlerContext) {
        switch state {
        case .reading:
            state = .done
            var buffer = unread.take() ?? context.channel.allocator.buffer(capacity: 0)
            do {
                _ = try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: true)
            } catch {
                context.fireErrorCaught(error)
            }
        case .decoding:
            state = .decoding(inputEnded: true)
        case .done:
            return
        }
    }

    /// Appends `read` to what waits to be decoded.
    private func keepUnread(_ read: inout ByteBuffer) {
        guard read.readableBytes > 0 else { return }
        if unread == nil {
            unread = read
        } else {
            unread?.writeBuffer(&read)
        }
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        unread = nil
        state = .done
        context.fireErrorCaught(error)
    }
}
