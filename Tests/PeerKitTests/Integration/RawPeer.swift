import NIOConcurrencyHelpers
import NIOCore
import NIOExtras
import NIOPosix
@testable import PeerKit

/// A hand-driven TCP peer for tests: writes whatever bytes a test wants (good frames, bad ones)
/// and reads back the frames it receives.
final class RawPeer {
    let channel: any Channel
    private var frames: AsyncStream<ByteBuffer>.AsyncIterator
    private let collector: Collector

    /// The error the connection ended with (a reset), described; nil while it is open and when it
    /// ended with the other side's FIN or our own close.
    var failure: String? { collector.failure.withLockedValue { $0 } }

    /// Hands each decoded frame to a stream, and ends it when the connection closes (shared with
    /// `TLSRawPeer`).
    final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let continuation: AsyncStream<ByteBuffer>.Continuation
        /// The first error the connection ended with (a reset), described; nil when it ended
        /// with the peer's FIN or our own close.
        let failure = NIOLockedValueBox<String?>(nil)
        init(_ continuation: AsyncStream<ByteBuffer>.Continuation) { self.continuation = continuation }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { continuation.yield(unwrapInboundIn(data)) }
        func channelInactive(context: ChannelHandlerContext) { continuation.finish() }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            failure.withLockedValue { $0 = $0 ?? "\(error)" }
            context.close(promise: nil)
        }
    }

    /// Connects to `endpoint` (from the local address `source`, such as 127.0.0.2, when given);
    /// received frames are split at their length fields (NIOExtras).
    init(connectingTo endpoint: PeerEndpoint, from source: String? = nil) async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
        let collector = Collector(continuation)
        self.collector = collector
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                    try channel.pipeline.syncOperations.addHandler(collector)
                }
            }
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        channel = try await bootstrap
            .connect(host: endpoint.host, port: endpoint.port)
            .get()
        frames = stream.makeAsyncIterator()
    }

    /// Writes raw bytes.
    func write(_ bytes: ByteBuffer) async throws {
        try await channel.writeAndFlush(bytes)
    }

    /// Writes one frame with `json` as its body.
    func send(_ json: String) async throws {
        try await write(.frame(json))
    }

    /// Sends a valid hello; `features` nil sends none, as a peer older than features does;
    /// `session` is this run's session id for the feature resume.
    func sayHello(serviceType: String, peerID: String = "raw-peer", name: String = "raw", features: [String]? = nil, session: String? = nil) async throws {
        try await write(ConnectionStateMachine.ControlFrame.hello(Hello(peerID: peerID, name: name, serviceType: serviceType, discoveryInfo: nil, features: features, session: session)).encode())
    }

    /// The next frame's body whose text does not start with one of `prefixes` (pings, by
    /// default), or nil when the connection closed.
    func nextFrame(skipping prefixes: [String] = [#"{"type":"peerkit.ping""#]) async -> String? {
        while let frame = await frames.next() {
            let text = String(buffer: frame)
            if !prefixes.contains(where: text.hasPrefix) { return text }
        }
        return nil
    }

    func close() {
        channel.close(promise: nil)
    }
}
