import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// `--metrics-port`: serves what PeerKit records (through swift-prometheus) as Prometheus text on
/// `GET /metrics`, until graceful shutdown.
///
/// One request per connection, answered and closed; anything but `GET /metrics` gets 404 (405 for
/// another method on `/metrics`). A client may make it hold at most ``maximumRequestBytes`` of
/// request and keep a connection at most ``idleTimeout`` without sending.
final class MetricsServer: Service, Sendable {
    /// The most bytes read from one connection: a scrape's request is a few hundred bytes, so
    /// 8 KiB is plenty, and a client cannot make the server buffer a large head or body.
    static let maximumRequestBytes = 8 * 1024
    /// How long a connection may stay silent before it is closed: a scraper sends its request at
    /// once, so 10 s only cuts off connections that were opened and left.
    static let idleTimeout: TimeAmount = .seconds(10)

    private let host: String
    private let port: Int
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger

    init(host: String, port: Int, registry: PrometheusCollectorRegistry, logger: Logger) {
        self.host = host
        self.port = port
        self.registry = registry
        self.logger = logger
    }

    func run() async throws {
        let registry = registry
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(RequestSizeLimiter(maximumBytes: Self.maximumRequestBytes))
                    try pipeline.addHandler(IdleStateHandler(allTimeout: Self.idleTimeout))
                    try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: true)
                    try pipeline.addHandler(MetricsHTTPHandler(registry: registry))
                }
            }
            .bind(host: host, port: port)
            .get()
        let address = channel.localAddress.map { "\($0.ipAddress ?? host):\($0.port ?? port)" } ?? "\(host):\(port)"
        logger.info("Serving metrics on http://\(address)/metrics")
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
    }
}

/// Closes a connection that sends more than `maximumBytes` in all.
final class RequestSizeLimiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let maximumBytes: Int
    private var received = 0

    init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += unwrapInboundIn(data).readableBytes
        guard received <= maximumBytes else {
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
    }
}

/// Answers `GET /metrics` with the registry's text, anything else with 404 or 405, and closes.
final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    /// The request's head, until its end arrives (its body, if any, is ignored).
    private var head: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let status: HTTPResponseStatus
        var body = context.channel.allocator.buffer(capacity: 0)
        if path != "/metrics" {
            status = .notFound
            body.writeString("Not found: only /metrics is served here.\n")
        } else if head.method != .GET && head.method != .HEAD {
            status = .methodNotAllowed
            body.writeString("Only GET is allowed on /metrics.\n")
        } else {
            status = .ok
            var bytes: [UInt8] = []
            registry.emit(into: &bytes)
            body.writeBytes(bytes)
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: status == .ok ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Connection", value: "close")
        if status == .methodNotAllowed { headers.add(name: "Allow", value: "GET, HEAD") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}
