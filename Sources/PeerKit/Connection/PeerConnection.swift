import NIOConcurrencyHelpers
import NIOCore

/// A handle on one TCP connection to a peer, safe to use from any thread.
///
/// Frames to send wait in an outbox and are written on the channel's event loop in batches: the
/// first frame queued in a tick schedules one drain, which writes and flushes once. Data frames
/// move to the channel only while it is writable, so a backlog waits here rather than in the
/// socket's buffers, and urgent frames (pings and pongs) overtake it: a peer that is slow to read
/// a burst still answers its heartbeats in time. ``waitUntilWritable()`` lets senders wait while
/// the outbox is over its high-water mark.
final class PeerConnection: Sendable, CustomStringConvertible {
    /// Who dialled.
    let direction: TieBreak.Direction
    /// The channel.
    let channel: any Channel
    /// The discovery key this connection was dialled for (outbound only).
    let serviceKey: String?
    /// `host:port` of the remote end, for messages.
    let remoteDescription: String

    /// Above this many queued bytes, ``waitUntilWritable()`` waits…
    static let outboxHighWatermark = 1 << 20
    /// …until the outbox is down to this many.
    static let outboxLowWatermark = 1 << 18

    private struct State {
        var queued = CircularBuffer<ByteBuffer>()
        var queuedBytes = 0
        var urgent: [ByteBuffer] = []
        var drainScheduled = false
        var remote: Hello?
        var peer: Peer?
        var retired = false
        var closedLocally = false
        var closed = false
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

    /// Whether this side started closing the connection (stop, retirement, a protocol error).
    var isClosedLocally: Bool { state.withLockedValue { $0.closedLocally } }

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

    // MARK: Sending

    /// Queues a complete frame for writing; an `urgent` one (a ping or pong) goes before any
    /// data still in the outbox.
    func send(_ frame: ByteBuffer, urgent: Bool = false) {
        let scheduleDrain = state.withLockedValue { state -> Bool in
            if urgent {
                state.urgent.append(frame)
            } else {
                state.queued.append(frame)
                state.queuedBytes += frame.readableBytes
            }
            if state.drainScheduled { return false }
            state.drainScheduled = true
            return true
        }
        if scheduleDrain {
            channel.eventLoop.execute { self.drain() }
        }
    }

    /// Returns once the outbox is below its high-water mark (at once when it is), so that a fast
    /// sender does not queue without bound; returns too when the connection closes.
    func waitUntilWritable() async {
        guard state.withLockedValue({ $0.queuedBytes > Self.outboxHighWatermark && !$0.closed }) else { return }
        await withCheckedContinuation { continuation in
            let waiting = state.withLockedValue { state -> Bool in
                guard state.queuedBytes > Self.outboxHighWatermark, !state.closed else { return false }
                state.writabilityWaiters.append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    /// Called by the handler on the event loop when the channel's writability changes.
    func writabilityChanged(isWritable: Bool) {
        if isWritable { drain() }
    }

    /// Called by the handler when the channel closed: releases every waiting sender.
    func channelClosed() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.closed = true
            state.queued.removeAll()
            state.queuedBytes = 0
            defer { state.writabilityWaiters = [] }
            return state.writabilityWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Writes urgent frames, then data frames while the channel is writable (every one when
    /// `everything`), and flushes once. Runs on the event loop.
    private func drain(everything: Bool = false) {
        var wrote = false
        var released: [CheckedContinuation<Void, Never>] = []
        while true {
            let next = state.withLockedValue { state -> ByteBuffer? in
                if !state.urgent.isEmpty { return state.urgent.removeFirst() }
                guard everything || channel.isWritable, let frame = state.queued.popFirst() else {
                    state.drainScheduled = false
                    if state.queuedBytes <= Self.outboxLowWatermark {
                        released = state.writabilityWaiters
                        state.writabilityWaiters = []
                    }
                    return nil
                }
                state.queuedBytes -= frame.readableBytes
                return frame
            }
            guard let next else { break }
            channel.write(next, promise: nil)
            wrote = true
        }
        if wrote { channel.flush() }
        for waiter in released { waiter.resume() }
    }

    // MARK: Closing

    /// Sends what is queued and `bye`, then waits for the peer to close (reading what it still
    /// sends), closing by itself after `timeout`.
    func retire(bye: ByteBuffer, timeout: TimeAmount) {
        state.withLockedValue { $0.closedLocally = true }
        channel.eventLoop.execute {
            self.drain(everything: true)
            guard self.channel.isActive else { return }
            self.channel.writeAndFlush(bye, promise: nil)
            let channel = self.channel
            channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
    }

    /// Sends what is queued and `errorFrame`, then shuts down the output only: what the peer
    /// still sends is read and dropped, so the connection ends with a FIN the peer can read the
    /// error before, not with a reset that would discard it. Closes fully when the peer closes,
    /// or after `timeout`.
    func fail(with errorFrame: ByteBuffer, timeout: TimeAmount = .seconds(1)) {
        state.withLockedValue { $0.closedLocally = true }
        channel.eventLoop.execute {
            self.drain(everything: true)
            guard self.channel.isActive else { return }
            let channel = self.channel
            channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            channel.writeAndFlush(errorFrame).whenComplete { _ in
                channel.close(mode: .output, promise: nil)
            }
        }
    }

    /// Sends what is queued, then `lastFrame`, then closes; closes anyway after `timeout` when the
    /// peer does not read what is sent.
    func close(after lastFrame: ByteBuffer?, timeout: TimeAmount = .seconds(1)) {
        state.withLockedValue { $0.closedLocally = true }
        channel.eventLoop.execute {
            self.drain(everything: true)
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
