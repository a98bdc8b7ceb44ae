import NIOConcurrencyHelpers
import NIOCore

/// A handle on one TCP connection to a peer, safe to use from any thread.
///
/// Frames to send are queued and written on the channel's event loop in batches: the first
/// frame queued in a tick schedules one drain, and the drain writes every queued frame and
/// flushes once. A burst of sends from another thread therefore costs one flush.
final class PeerConnection: Sendable, CustomStringConvertible {
    /// Who dialled.
    let direction: TieBreak.Direction
    /// The channel.
    let channel: any Channel
    /// The discovery key this connection was dialled for (outbound only).
    let serviceKey: String?
    /// `host:port` of the remote end, for messages.
    let remoteDescription: String

    private struct State {
        var queued: [ByteBuffer] = []
        var drainScheduled = false
        var remote: Hello?
        var peer: Peer?
        var retired = false
        var isWritable = true
        var writabilityWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    init(channel: any Channel, direction: TieBreak.Direction, serviceKey: String?) {
        self.channel = channel
        self.direction = direction
        self.serviceKey = serviceKey
        self.remoteDescription = channel.remoteAddress.map(PeerConnection.describe) ?? "an unknown address"
    }

    /// The peer's hello, once the handshake completed.
    var remote: Hello? { state.withLockedValue { $0.remote } }

    /// The peer at the other end, once the handshake completed.
    var peer: Peer? { state.withLockedValue { $0.peer } }

    /// Whether this connection lost a tie-break or was otherwise retired.
    var isRetired: Bool { state.withLockedValue { $0.retired } }

    func setRemote(_ hello: Hello) {
        let peer = Peer(id: hello.peerID, name: hello.name, discoveryInfo: hello.discoveryInfo ?? [:], isConnected: true)
        state.withLockedValue {
            $0.remote = hello
            $0.peer = peer
        }
    }

    /// Marks the connection retired; returns false when it already was.
    func retire() -> Bool {
        state.withLockedValue { state in
            defer { state.retired = true }
            return !state.retired
        }
    }

    var description: String {
        if let remote { return "\"\(remote.name)\" at \(remoteDescription)" }
        return remoteDescription
    }

    /// Queues a complete frame for writing.
    func send(_ frame: ByteBuffer) {
        let scheduleDrain = state.withLockedValue { state -> Bool in
            state.queued.append(frame)
            if state.drainScheduled { return false }
            state.drainScheduled = true
            return true
        }
        if scheduleDrain {
            channel.eventLoop.execute { self.drain() }
        }
    }

    /// Returns once the channel can take more data (at once when it can), so that a fast sender
    /// does not queue without bound; returns too when the connection closes.
    func waitUntilWritable() async {
        guard !state.withLockedValue({ $0.isWritable }) else { return }
        await withCheckedContinuation { continuation in
            let waiting = state.withLockedValue { state -> Bool in
                guard !state.isWritable else { return false }
                state.writabilityWaiters.append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    /// Called by the handler when the channel's writability changes, and with `true` when it closes.
    func writabilityChanged(isWritable: Bool) {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.isWritable = isWritable
            guard isWritable else { return [] }
            defer { state.writabilityWaiters = [] }
            return state.writabilityWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Writes every queued frame and flushes once. Runs on the event loop.
    private func drain() {
        let frames = state.withLockedValue { state -> [ByteBuffer] in
            state.drainScheduled = false
            defer { state.queued.removeAll(keepingCapacity: true) }
            return state.queued
        }
        guard !frames.isEmpty else { return }
        for frame in frames {
            channel.write(frame, promise: nil)
        }
        channel.flush()
    }

    /// Sends what is queued and `bye`, then waits for the peer to close (reading what it still
    /// sends), closing by itself after `timeout`.
    func retire(bye: ByteBuffer, timeout: TimeAmount) {
        channel.eventLoop.execute {
            self.drain()
            guard self.channel.isActive else { return }
            self.channel.writeAndFlush(bye, promise: nil)
            let channel = self.channel
            channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
    }

    /// Sends what is queued, then `lastFrame`, then closes; closes anyway after `timeout` when the
    /// peer does not read what is sent.
    func close(after lastFrame: ByteBuffer?, timeout: TimeAmount = .seconds(1)) {
        channel.eventLoop.execute {
            self.drain()
            guard self.channel.isActive else { return }
            if let lastFrame {
                let channel = self.channel
                let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                channel.writeAndFlush(lastFrame).whenComplete { _ in
                    deadline.cancel()
                    channel.close(promise: nil)
                }
            } else {
                self.channel.close(promise: nil)
            }
        }
    }

    private static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4:
            return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6:
            return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket:
            return address.pathname ?? "a Unix socket"
        }
    }
}
