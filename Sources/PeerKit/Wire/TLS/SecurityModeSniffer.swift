import NIOCore

/// The first handler of every pipeline: looks at the first bytes a peer sends to tell a TLS peer
/// from a plaintext one, so that a peer of the other mode is refused with a sentence (not with a
/// TLS error or a "frame too large"), then removes itself.
///
/// A TLS connection starts with a handshake record (byte 0x16, then 0x03) or an alert (0x15); a
/// plaintext PeerKit connection starts with a 4-byte frame length, whose first byte is 0x00 for
/// any frame shorter than 16 MiB. A plaintext frame length of 352 MiB or more would look like TLS;
/// PeerKit refuses such frames anyway unless ``PeerConfiguration/maximumFrameLength`` allows them.
///
/// On an accepted connection it also bounds how long the peer may take to send those first bytes
/// (``PeerConfiguration/preHandshakeTimeout``): a connection that says nothing is closed then,
/// freeing its handshake slot, instead of after the whole handshake timeout.
final class SecurityModeSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Nothing arrived within the pre-handshake timeout.
    struct SilentPeer: Error, CustomStringConvertible {
        var timeout: TimeAmount

        var description: String {
            "it sent nothing within \(Double(timeout.nanoseconds) / 1e9) s of connecting (PeerConfiguration.preHandshakeTimeout)"
        }
    }

    /// The sentence a TLS server sends, in plaintext, to a plaintext PeerKit client before closing.
    static let tlsRequiredReason = "this peer requires TLS (its PeerConfiguration.security is not .none)"

    private let expectsTLS: Bool
    private let inbound: Bool
    private let security: WireSecurity
    private var decided = false
    /// How long the first bytes may take, and the clock that times it (nil: no limit).
    private let firstBytesTimeout: (timeout: TimeAmount, clock: PeerClock)?
    private var timer: PeerTimer?

    init(expectsTLS: Bool, inbound: Bool, security: WireSecurity, firstBytesTimeout: (timeout: TimeAmount, clock: PeerClock)? = nil) {
        self.expectsTLS = expectsTLS
        self.inbound = inbound
        self.security = security
        self.firstBytesTimeout = firstBytesTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startTimer(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startTimer(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func startTimer(context: ChannelHandlerContext) {
        guard let (timeout, clock) = firstBytesTimeout, timer == nil, !decided else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        timer = clock.schedule(on: eventLoop, in: .nanoseconds(timeout.nanoseconds)) {
            eventLoop.execute {
                let (sniffer, context) = loopBound.value
                guard !sniffer.decided, context.channel.isActive else { return }
                sniffer.decided = true
                context.fireErrorCaught(SilentPeer(timeout: timeout))
                context.close(promise: nil)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else {
            context.fireChannelRead(data)
            return
        }
        let buffer = unwrapInboundIn(data)
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return }
        let second = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self)
        let looksLikeTLS = (first == 0x16 || first == 0x15) && (second == nil || second == 0x03)
        decided = true
        timer?.cancel()
        timer = nil
        if looksLikeTLS == expectsTLS {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        let peer = security.describe(context.channel.remoteAddress)
        if expectsTLS {
            if inbound {
                // Tell a plaintext PeerKit client why, in a frame it can read.
                let frame = ConnectionStateMachine.ControlFrame.error(
                    reason: "Closing the connection: " + Self.tlsRequiredReason + ".", replyTo: nil
                ).encode(allocator: context.channel.allocator)
                // Written (and flushed) before the connection handler closes the channel.
                context.writeAndFlush(NIOAny(frame), promise: nil)
            }
            context.fireErrorCaught(PeerKitError.plaintextPeer(peer: peer, security: security.security.txtValue))
        } else {
            context.fireErrorCaught(PeerKitError.tlsPeer(peer: peer))
        }
        context.close(promise: nil)
    }
}
