import ArgumentParser
import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import Synchronization

extension PeerKitBench {
    /// One node of an idle full mesh in bare SwiftNIO: the idle mesh's floor with NIO's event
    /// loops and pipeline but none of PeerKit (`nio.mesh.N.exchange`).
    ///
    /// It is `rawbench mesh` written with NIO: node I listens on 127.0.0.1:PI, dials P0 … P(I−1),
    /// and prints `{"event":"ready"}` once it holds a connection to each of the other nodes. Its
    /// connections are on NIO's default group (one event loop per CPU, as `peerkit node`'s), each
    /// with NIOExtras' `LengthFieldBasedFrameDecoder` and a handler that answers a ping
    /// with a pong at once; each connection the node dialled sends a ping at every beat (whole
    /// multiples of 1.25 s on NIO's uptime clock, as PeerKit's heartbeat). The frames are
    /// PeerKit's ping and pong, byte for byte; nothing parses them beyond the byte that tells
    /// the two apart.
    struct NIOMesh: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "nio-mesh",
            abstract: "One node of an idle full mesh in bare SwiftNIO, pinging on PeerKit's heartbeat beats."
        )

        @Option(help: "This node's place in --ports: it listens on that port and dials the ports before it.")
        var index: Int

        @Option(help: "Every node's port on 127.0.0.1, comma-separated, in the nodes' order.")
        var ports: String

        @Option(help: "Seconds after which the process exits with an error, whatever it is doing.")
        var timeout: Double = 60

        func run() throws {
            let ports = self.ports.split(separator: ",").compactMap { Int($0) }
            guard ports.count >= 2, ports.indices.contains(index) else {
                throw ValidationError("--ports needs two or more ports, and --index must be the place of one of them.")
            }
            let seconds = timeout
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: seconds)
                Report.fail("The NIO mesh node did not end within \(seconds) s; giving up. Raise --timeout if the machine is slow.")
            }
            let connections = ConnectionCount(needed: ports.count - 1)
            let group = MultiThreadedEventLoopGroup.singleton
            let server = try ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try MeshHandler.addHandlers(to: channel, dialled: false, connections: connections)
                    }
                }
                .bind(host: "127.0.0.1", port: ports[index]).wait()
            for port in ports[..<index] {
                // The node before may not listen yet: dial again until it does.
                while true {
                    do {
                        _ = try ClientBootstrap(group: group)
                            .channelInitializer { channel in
                                channel.eventLoop.makeCompletedFuture {
                                    try MeshHandler.addHandlers(to: channel, dialled: true, connections: connections)
                                }
                            }
                            .connect(host: "127.0.0.1", port: port).wait()
                        break
                    } catch {
                        Thread.sleep(forTimeInterval: 0.02)
                    }
                }
            }
            try server.closeFuture.wait()
        }
    }
}

/// Counts the node's connections and prints the ready line when the last one is made.
private final class ConnectionCount: Sendable {
    private let needed: Int
    private let count = Atomic(0)

    init(needed: Int) {
        self.needed = needed
    }

    func oneMore() {
        if count.add(1, ordering: .relaxed).newValue == needed {
            Report.emit(["event": "ready"])
        }
    }
}

/// Answers pings with pongs; on a connection it dialled, pings at every beat.
private final class MeshHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let ping = #"{"type":"peerkit.ping","id":"ping-7","payload":{}}"#
    static let pong = #"{"type":"peerkit.pong","replyTo":"ping-7","payload":{}}"#
    /// The byte at which "peerkit.ping" and "peerkit.pong" first differ.
    static let kindOffset = #"{"type":"peerkit.p"#.utf8.count
    static let beatNanoseconds: UInt64 = 1_250_000_000

    private let dialled: Bool
    private let connections: ConnectionCount

    static func addHandlers(to channel: any Channel, dialled: Bool, connections: ConnectionCount) throws {
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
        try channel.pipeline.syncOperations.addHandler(MeshHandler(dialled: dialled, connections: connections))
    }

    private init(dialled: Bool, connections: ConnectionCount) {
        self.dialled = dialled
        self.connections = connections
    }

    func channelActive(context: ChannelHandlerContext) {
        connections.oneMore()
        if dialled { pingAtNextBeat(context: context) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.getInteger(at: frame.readerIndex + Self.kindOffset, as: UInt8.self) == UInt8(ascii: "i") {
            context.writeAndFlush(wrapOutboundOut(Self.frame(Self.pong, context.channel.allocator)), promise: nil)
        }
    }

    private func pingAtNextBeat(context: ChannelHandlerContext) {
        let now = NIODeadline.now().uptimeNanoseconds
        let beat = (now / Self.beatNanoseconds + 1) * Self.beatNanoseconds
        context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(beat)) {
            guard context.channel.isActive else { return }
            context.writeAndFlush(self.wrapOutboundOut(Self.frame(Self.ping, context.channel.allocator)), promise: nil)
            self.pingAtNextBeat(context: context)
        }
    }

    private static func frame(_ body: String, _ allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 4 + body.utf8.count)
        buffer.writeInteger(UInt32(body.utf8.count))
        buffer.writeString(body)
        return buffer
    }
}
