import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
@testable import PeerKit

/// A loopback configuration with `security`.
func secureConfiguration(serviceType: String, name: String, security: PeerSecurity, peers: [PeerEndpoint] = []) -> PeerConfiguration {
    var configuration = loopbackConfiguration(serviceType: serviceType, name: name, peers: peers)
    configuration.security = security
    return configuration
}

/// The first `.error` event whose error matches `predicate`.
func nextError(
    _ events: AsyncStream<PeerEvent>, _ what: String, within seconds: Double = 20,
    where predicate: @escaping @Sendable (PeerKitError) -> Bool
) async throws -> PeerKitError {
    let event = try await nextEvent(events, within: seconds, what) { event in
        if case let .error(error) = event { return predicate(error) }
        return false
    }
    guard case let .error(error) = event else { throw TimedOut(what: what) }
    return error
}

/// Records every event of a transceiver from now on, for later assertions about what did not happen.
final class EventLog: Sendable {
    private let events = NIOLockedValueBox<[PeerEvent]>([])
    private let task: Task<Void, Never>

    init(_ transceiver: PeerTransceiver) {
        let stream = transceiver.events()
        let events = self.events
        task = Task {
            for await event in stream { events.withLockedValue { $0.append(event) } }
        }
    }

    deinit { task.cancel() }

    var all: [PeerEvent] { events.withLockedValue { $0 } }

    var errors: [PeerKitError] {
        all.compactMap { if case let .error(error) = $0 { return error } else { return nil } }
    }

    var connected: [Peer] {
        all.compactMap { if case let .peerConnected(peer) = $0 { return peer } else { return nil } }
    }

    /// Waits up to `seconds` for an `.error` event matching `predicate`; on timeout, the error
    /// lists every event seen, so that a failure shows what came instead.
    @discardableResult
    func waitForError(_ what: String, within seconds: Double = 20, where predicate: @escaping @Sendable (PeerKitError) -> Bool) async throws -> PeerKitError {
        do {
            return try await within(seconds, what) {
                while true {
                    if let error = self.errors.first(where: predicate) { return error }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        } catch is TimedOut {
            throw TimedOut(what: "\(what); the events seen instead: \(all)")
        }
    }
}

/// A TCP proxy on 127.0.0.1 that forwards one connection at a time to `target` and records the
/// bytes each way, for replay and capture tests.
final class RecordingProxy: Sendable {
    let channel: any Channel
    private let recorded = NIOLockedValueBox((toServer: [UInt8](), toClient: [UInt8]()))

    /// Bytes the client sent, in order.
    var clientBytes: [UInt8] { recorded.withLockedValue { $0.toServer } }
    /// Bytes the server sent, in order.
    var serverBytes: [UInt8] { recorded.withLockedValue { $0.toClient } }
    /// Everything seen, both ways.
    var allBytes: [UInt8] { recorded.withLockedValue { $0.toServer + $0.toClient } }

    var port: Int { channel.localAddress?.port ?? 0 }

    private final class Relay: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        /// The other side, and what arrived before it was connected.
        private let peer = NIOLockedValueBox<(channel: (any Channel)?, pending: [ByteBuffer], closed: Bool)>((nil, [], false))
        let record: @Sendable ([UInt8]) -> Void
        init(record: @escaping @Sendable ([UInt8]) -> Void) { self.record = record }

        func connect(to channel: any Channel) {
            let (pending, closed) = peer.withLockedValue { state in
                state.channel = channel
                defer { state.pending = [] }
                return (state.pending, state.closed)
            }
            for buffer in pending { channel.write(buffer, promise: nil) }
            channel.flush()
            if closed { channel.close(promise: nil) }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            record(Array(buffer.readableBytesView))
            let target = peer.withLockedValue { state -> (any Channel)? in
                if state.channel == nil { state.pending.append(buffer) }
                return state.channel
            }
            target?.writeAndFlush(buffer, promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            let target = peer.withLockedValue { state -> (any Channel)? in
                state.closed = true
                return state.channel
            }
            target?.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    init(target: PeerEndpoint) async throws {
        let recorded = self.recorded
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { inbound in
                let toServer = Relay { bytes in recorded.withLockedValue { $0.toServer += bytes } }
                let toClient = Relay { bytes in recorded.withLockedValue { $0.toClient += bytes } }
                toClient.connect(to: inbound)
                ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.eventLoop.makeCompletedFuture { try outbound.pipeline.syncOperations.addHandler(toClient) }
                    }
                    .connect(host: target.host, port: target.port)
                    .whenComplete { result in
                        switch result {
                        case let .success(outbound): toServer.connect(to: outbound)
                        case .failure: inbound.close(promise: nil)
                        }
                    }
                return inbound.eventLoop.makeCompletedFuture { try inbound.pipeline.syncOperations.addHandler(toServer) }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func close() { channel.close(promise: nil) }
}

/// Runs `arguments` to its end, as the unprivileged user nobody when the tests run as root, with
/// `input` on its standard input; returns its exit status and output. The process is ended by its
/// PID when it outlives `timeout`.
func runTool(_ arguments: [String], input: Data = Data(), timeout: Duration = .seconds(30)) async throws -> (status: Int32, output: String) {
    let process = Process()
    var command = arguments
    if getuid() == 0 {
        command = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + command
    }
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = command
    let stdin = Pipe(), stdout = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stdout
    let exit = try process.runWatched()
    let pid = process.processIdentifier
    // Read and waited for on threads of their own (ProcessSupport.swift).
    async let data = stdout.fileHandleForReading.readToEndOnOwnThread()
    stdin.fileHandleForWriting.write(input)
    try stdin.fileHandleForWriting.close()
    let killer = Task {
        try await Task.sleep(for: timeout)
        kill(pid, SIGKILL)
    }
    let output = await data
    let status = await exit.value
    killer.cancel()
    return (status, String(decoding: output, as: UTF8.self))
}
