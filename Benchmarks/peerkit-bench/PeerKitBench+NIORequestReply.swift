import ArgumentParser
import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import PeerKit
import Synchronization

extension PeerKitBench {
    /// The answering side of request/reply in bare SwiftNIO: request/reply's floor with NIO's
    /// event loops and pipeline but none of PeerKit (`nio.rtt.loop`, `nio.rtt.looptask`, `nio.rtt.tasks`).
    ///
    /// It listens on 127.0.0.1, prints `{"event":"ready",...}`, and answers every frame (a 4-byte
    /// big-endian length and an opaque body, read by NIOExtras' `LengthFieldBasedFrameDecoder`) with
    /// a frame of the same body, until its one connection closes. With `--hand-off none` it
    /// answers in the handler; otherwise each request goes to a Swift task (through an
    /// `AsyncStream`) that writes the reply with `writeAndFlush`: a task on the connection's
    /// event loop (`loop-task`, through PeerKit's `EventLoopTaskExecutor`, as PeerKit's handlers
    /// on one loop), or on the global executor (`task`, the two hand-offs PeerKit's default makes
    /// on this side).
    struct NIOEcho: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "nio-echo",
            abstract: "Answer length-prefixed frames with the same bytes in bare SwiftNIO, until the requester leaves."
        )

        @OptionGroup var options: NIORequestReplyOptions

        func run() async throws {
            options.startWatchdog("The NIO echo server")
            let handsOff = options.handOff != .none
            let (requests, queue) = AsyncStream.makeStream(of: (ByteBuffer, any Channel).self)
            let firstClose = options.loop.makePromise(of: Void.self)
            let server = try await ServerBootstrap(group: options.loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                        try channel.pipeline.syncOperations.addHandler(NIOEchoHandler(handOff: handsOff ? queue : nil, firstClose: firstClose))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
            let port = server.localAddress?.port ?? 0
            Report.emit(ReadyLine(port: port, ports: [port]))
            if handsOff {
                // The handler task: on the connection's loop, or off it as PeerKit's default handlers are.
                Task(executorPreference: options.executor) {
                    for await (request, channel) in requests {
                        channel.writeAndFlush(NIORequestReplyOptions.frame(request, channel.allocator), promise: nil)
                    }
                }
            }
            // The first connection's end ends the process (the echo's close event).
            try await firstClose.futureResult.get()
            try await server.close()
            queue.finish()
        }
    }

    /// The measuring side of request/reply in bare SwiftNIO: one request at a time, each timed;
    /// prints the same percentiles as `ping`.
    ///
    /// With `--hand-off none` the requests are sent from the handler on the event loop, each as
    /// the reply to the one before arrives: no Swift task at all, NIO's pipeline and one event
    /// loop alone. Otherwise a task sends each request with `writeAndFlush` and waits for its
    /// reply on a continuation that the handler resumes: a task on the connection's event loop
    /// (`loop-task`, as PeerKit's requests made on one loop), or on the global executor (`task`,
    /// the two hand-offs PeerKit's default makes on this side).
    struct NIOPing: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "nio-ping",
            abstract: "Send length-prefixed frames one at a time in bare SwiftNIO and print the round-trip percentiles."
        )

        @OptionGroup var trips: RoundTripOptions
        @OptionGroup var options: NIORequestReplyOptions

        func run() async throws {
            options.startWatchdog("The NIO requester")
            let parts = trips.connect.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]) else {
                throw ValidationError("\"\(trips.connect)\" is not an endpoint; pass HOST:PORT, for example 127.0.0.1:5000.")
            }
            let body = ByteBuffer(repeating: UInt8(ascii: "z"), count: trips.size)
            let rounds = trips.warmup + trips.count
            let replies = NIOReplies(on: options.loop)
            let drive = options.handOff == .none ? NIOPingHandler.Drive(request: body, rounds: rounds) : nil
            let channel = try await ClientBootstrap(group: options.loop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                        try channel.pipeline.syncOperations.addHandler(NIOPingHandler(replies: replies, drive: drive))
                    }
                }
                .connect(host: String(parts[0]), port: port).get()
            let times: [Double]
            if drive == nil {
                let size = trips.size
                times = try await withTaskExecutorPreference(options.executor) {
                    var samples: [Double] = []
                    samples.reserveCapacity(rounds)
                    let clock = ContinuousClock()
                    for _ in 0..<rounds {
                        let begin = clock.now
                        let reply = try await replies.request(NIORequestReplyOptions.frame(body, channel.allocator), on: channel)
                        samples.append(clock.now.seconds(since: begin) * 1e6)
                        guard reply.readableBytes == size else {
                            Report.fail("A reply had \(reply.readableBytes) bytes where \(size) were sent.")
                        }
                    }
                    return samples
                }
            } else {
                times = try await replies.driven()
            }
            Report.emit(LatencySummary(samples: Array(times.dropFirst(trips.warmup))))
            try await channel.close()
        }
    }
}

/// Options both sides of the bare-NIO request/reply take.
struct NIORequestReplyOptions: ParsableArguments {
    /// Where the requests and replies are handled: in the channel handlers, or in a Swift task.
    enum HandOff: String, ExpressibleByArgument {
        /// In the handlers, on the event loop: no Swift task.
        case none
        /// In a Swift task on the connection's event loop (`EventLoopTaskExecutor`).
        case loopTask = "loop-task"
        /// In a Swift task on the global executor, off the event loop.
        case task
    }

    @Option(help: "Where requests and replies are handled: none (in the channel handlers), loop-task (a Swift task on the connection's event loop) or task (a Swift task on the global executor, as PeerKit's default).")
    var handOff: HandOff = .none

    @Option(help: "Seconds after which the process exits with an error, whatever it is doing.")
    var timeout: Double = 60

    /// The process's one event loop: its connection's, and with `loop-task` its task's.
    var loop: any EventLoop { Self.loop }

    /// The executor of the Swift task that handles requests or replies: the connection's loop
    /// with `loop-task`, the global executor (nil) otherwise.
    var executor: EventLoopTaskExecutor? { handOff == .loopTask ? Self.executor : nil }

    private static let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1).next()
    private static let executor = EventLoopTaskExecutor(loop)

    func startWatchdog(_ what: String) {
        let seconds = timeout
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: seconds)
            Report.fail("\(what) did not finish within \(seconds) s; giving up. Raise --timeout if the machine is slow.")
        }
    }

    /// `body` behind its 4-byte big-endian length.
    static func frame(_ body: ByteBuffer, _ allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 4 + body.readableBytes)
        buffer.writeInteger(UInt32(body.readableBytes))
        buffer.writeImmutableBuffer(body)
        return buffer
    }
}

/// Answers each frame with the same body: in place, or through `handOff` to a task.
private final class NIOEchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Completed when the first connection closes.
    private let firstClose: EventLoopPromise<Void>

    private let handOff: AsyncStream<(ByteBuffer, any Channel)>.Continuation?

    init(handOff: AsyncStream<(ByteBuffer, any Channel)>.Continuation?, firstClose: EventLoopPromise<Void>) {
        self.handOff = handOff
        self.firstClose = firstClose
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let request = unwrapInboundIn(data)
        if let handOff {
            handOff.yield((request, context.channel))
        } else {
            context.writeAndFlush(wrapOutboundOut(NIORequestReplyOptions.frame(request, context.channel.allocator)), promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        firstClose.succeed()
        context.fireChannelInactive()
    }
}

/// What the requester's task and its handler share: the task waiting for a reply, or the times
/// of the rounds the handler drove (`--hand-off none`).
private final class NIOReplies: Sendable {
    private let waiting = Mutex<CheckedContinuation<ByteBuffer, any Error>?>(nil)
    private let done: EventLoopPromise<[Double]>

    /// Replies whose last round completes a promise on `loop`, the process's one loop.
    init(on loop: any EventLoop) {
        done = loop.makePromise(of: [Double].self)
    }

    /// Sends `frame` and waits for the reply.
    func request(_ frame: ByteBuffer, on channel: any Channel) async throws -> ByteBuffer {
        try await withCheckedThrowingContinuation { continuation in
            waiting.withLock { $0 = continuation }
            channel.writeAndFlush(frame, promise: nil)
        }
    }

    /// The times of the rounds the handler drove, once the last reply came.
    func driven() async throws -> [Double] {
        try await done.futureResult.get()
    }

    /// Resumes the task waiting for `reply`.
    func resume(with reply: ByteBuffer) {
        waiting.withLock { waiting in
            waiting?.resume(returning: reply)
            waiting = nil
        }
    }

    /// The handler drove its last round.
    func finish(_ samples: [Double]) {
        done.succeed(samples)
    }

    /// The connection closed: whoever waits hears it.
    func closed() {
        waiting.withLock { waiting in
            waiting?.resume(throwing: ChannelError.eof)
            waiting = nil
        }
        done.fail(ChannelError.eof)
    }
}

/// Hands each reply to the waiting task, or times it and sends the next request (`--hand-off none`).
private final class NIOPingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The rounds the handler drives itself: the request to send again, how many rounds in all,
    /// the times so far.
    struct Drive: Sendable {
        let request: ByteBuffer
        let rounds: Int
        var samples: [Double] = []
        var begin = ContinuousClock.now

        init(request: ByteBuffer, rounds: Int) {
            self.request = request
            self.rounds = rounds
            samples.reserveCapacity(rounds)
        }
    }

    private let replies: NIOReplies
    private var drive: Drive?

    init(replies: NIOReplies, drive: Drive?) {
        self.replies = replies
        self.drive = drive
    }

    func channelActive(context: ChannelHandlerContext) {
        if let request = drive?.request {
            drive?.begin = .now
            context.writeAndFlush(wrapOutboundOut(NIORequestReplyOptions.frame(request, context.channel.allocator)), promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let reply = unwrapInboundIn(data)
        // Taken out, so that appending to its samples does not copy them.
        guard var current = drive.take() else {
            replies.resume(with: reply)
            return
        }
        let now = ContinuousClock.now
        guard reply.readableBytes == current.request.readableBytes else {
            Report.fail("A reply had \(reply.readableBytes) bytes where \(current.request.readableBytes) were sent.")
        }
        current.samples.append(now.seconds(since: current.begin) * 1e6)
        current.begin = now
        guard current.samples.count < current.rounds else {
            replies.finish(current.samples)
            return
        }
        drive = current
        context.writeAndFlush(wrapOutboundOut(NIORequestReplyOptions.frame(current.request, context.channel.allocator)), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        replies.closed()
        context.fireChannelInactive()
    }
}
