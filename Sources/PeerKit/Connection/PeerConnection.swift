import NIOConcurrencyHelpers
import NIOCore

/// A handle on one TCP connection to a peer, safe to use from any thread.
///
/// **Outbound.** Frames to send wait in an outbox and are written on the channel's event loop in
/// batches: the first frame queued in a tick schedules one drain, which writes and flushes once.
/// Data frames move to the channel only while it is writable, so a backlog waits here rather than
/// in the socket's buffers, and urgent frames (pings and pongs) overtake it. ``waitUntilWritable()``
/// lets senders wait while the outbox is over its high-water mark; the connection's state machine
/// disconnects a peer whose outbox stays over ``PeerConfiguration/maximumQueuedOutboundBytes``.
///
/// **Inbound.** Messages handed to the dispatcher are counted (``inboundAccepted(_:)``) until
/// their handlers ran (``inboundHandled(_:)``); over ``PeerConfiguration/maximumQueuedInboundBytes``
/// the handler stops reading from the socket, and reading resumes once half of that is handled.
///
/// **Closing.** The connection's life belongs to its ``ConnectionStateMachine`` in
/// ``PeerConnectionHandler``; ``requestClose(_:)`` asks it, from any thread, to close.
final class PeerConnection: Sendable, CustomStringConvertible {
    /// Who dialled.
    let direction: TieBreak.Direction
    /// The channel.
    let channel: any Channel
    /// The discovery key this connection was dialled for (outbound only).
    let serviceKey: String?
    /// `host:port` of the remote end, for messages.
    let remoteDescription: String
    /// Over this many bytes of unhandled inbound messages, reading pauses.
    let maximumQueuedInboundBytes: Int
    /// Times the deadline for closing.
    let clock: PeerClock

    /// Above this many queued bytes, ``waitUntilWritable()`` waits…
    static let outboxHighWatermark = 1 << 20
    /// …until the outbox is down to this many.
    static let outboxLowWatermark = 1 << 18

    /// Asks the connection's handler to do something on its event loop
    /// (sent with `triggerUserOutboundEvent`).
    enum Request: Sendable {
        /// Close for this reason (``ConnectionStateMachine/CloseReason/stopped`` or `.duplicate`).
        case close(ConnectionStateMachine.CloseReason)
        /// The inbound backlog is handled: read again.
        case resumeReading
    }

    private struct State {
        var queued = CircularBuffer<ByteBuffer>()
        var queuedBytes = 0
        var urgent: [ByteBuffer] = []
        var drainScheduled = false
        var remote: Hello?
        var peer: Peer?
        var closed = false
        /// Why the connection ended, once it did.
        var closeError: PeerKitError?
        var writabilityWaiters: [CheckedContinuation<Void, Never>] = []
        var inboundBytes = 0
        var readingPaused = false
    }

    private let state = NIOLockedValueBox(State())

    init(channel: any Channel, direction: TieBreak.Direction, serviceKey: String?, maximumQueuedInboundBytes: Int = 4 << 20, clock: PeerClock = .continuous) {
        self.channel = channel
        self.clock = clock
        self.direction = direction
        self.serviceKey = serviceKey
        self.maximumQueuedInboundBytes = maximumQueuedInboundBytes
        self.remoteDescription = channel.remoteAddress.map(PeerConnection.describe) ?? "an unknown address"
    }

    /// The peer's hello, once the handshake completed.
    var remote: Hello? { state.withLockedValue { $0.remote } }

    /// The peer at the other end, once the handshake completed.
    var peer: Peer? { state.withLockedValue { $0.peer } }

    /// Bytes waiting in the outbox.
    var queuedOutboundBytes: Int { state.withLockedValue { $0.queuedBytes } }

    /// Whether reading is paused because this peer's messages wait for their handlers.
    var isReadingPaused: Bool { state.withLockedValue { $0.readingPaused } }

    func setRemote(_ hello: Hello) {
        let peer = Peer(id: hello.peerID, name: hello.name, discoveryInfo: hello.discoveryInfo ?? [:], isConnected: true)
        state.withLockedValue {
            $0.remote = hello
            $0.peer = peer
        }
    }

    var description: String {
        if let remote { return "\"\(LogSafe.text(remote.name, maximumBytes: 80))\" at \(remoteDescription)" }
        return remoteDescription
    }

    /// Asks the handler to close the connection for `reason`; safe from any thread.
    func requestClose(_ reason: ConnectionStateMachine.CloseReason) {
        channel.triggerUserOutboundEvent(Request.close(reason), promise: nil)
    }

    // MARK: Sending

    /// Queues a complete frame for writing; an `urgent` one (a ping or pong) goes before any
    /// data still in the outbox. Frames queued after the connection closed are dropped.
    func send(_ frame: ByteBuffer, urgent: Bool = false) {
        let scheduleDrain = state.withLockedValue { state -> Bool in
            guard !state.closed else { return false }
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
    /// sender does not queue without bound.
    /// - Throws: why the connection ended, when it ends before (or while) waiting.
    func waitUntilWritable() async throws(PeerKitError) {
        let mustWait = state.withLockedValue { $0.queuedBytes > Self.outboxHighWatermark && !$0.closed }
        if mustWait {
            await withCheckedContinuation { continuation in
                let waiting = state.withLockedValue { state -> Bool in
                    guard state.queuedBytes > Self.outboxHighWatermark, !state.closed else { return false }
                    state.writabilityWaiters.append(continuation)
                    return true
                }
                if !waiting { continuation.resume() }
            }
        }
        if let error = state.withLockedValue({ $0.closed ? ($0.closeError ?? .connectionClosed(peer: description)) : nil }) {
            throw error
        }
    }

    /// Called by the handler on the event loop when the channel's writability changes.
    func writabilityChanged(isWritable: Bool) {
        if isWritable { drain() }
    }

    /// Called by the handler when the connection ends (with `error` saying why, when it was not
    /// orderly): drops the outbox and releases every waiting sender.
    func ended(error: PeerKitError?) {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            if !state.closed { state.closeError = error }
            state.closed = true
            state.queued.removeAll()
            state.queuedBytes = 0
            state.urgent.removeAll()
            defer { state.writabilityWaiters = [] }
            return state.writabilityWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Writes urgent frames, then data frames while the channel is writable (every one when
    /// `everything`), and flushes once. Runs on the event loop.
    func drain(everything: Bool = false) {
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

    // MARK: Inbound accounting

    /// A message of `cost` bytes went to the dispatcher. Returns true when the backlog is now
    /// over the limit and reading must pause.
    func inboundAccepted(_ cost: Int) -> Bool {
        state.withLockedValue { state in
            state.inboundBytes += cost
            if state.inboundBytes > maximumQueuedInboundBytes { state.readingPaused = true }
            return state.readingPaused
        }
    }

    /// The handler of a message of `cost` bytes finished; resumes reading once the backlog is
    /// down to half the limit.
    func inboundHandled(_ cost: Int) {
        let resume = state.withLockedValue { state -> Bool in
            state.inboundBytes -= cost
            guard state.readingPaused, state.inboundBytes <= maximumQueuedInboundBytes / 2 else { return false }
            state.readingPaused = false
            return true
        }
        if resume {
            channel.triggerUserOutboundEvent(Request.resumeReading, promise: nil)
        }
    }

    // MARK: Closing (on the event loop, asked by the handler)

    /// Sends what is queued (unless `discardQueue`), then `lastFrame`, then closes as `mode` says,
    /// closing anyway after `timeout`. Runs on the event loop.
    func finish(lastFrame: ByteBuffer?, mode: ConnectionStateMachine.CloseMode, discardQueue: Bool, timeout: TimeAmount) {
        if discardQueue {
            state.withLockedValue { state in
                state.queued.removeAll()
                state.queuedBytes = 0
            }
        } else {
            drain(everything: true)
        }
        guard channel.isActive else { return }
        let channel = self.channel
        let deadline = clock.schedule(on: channel.eventLoop, in: .nanoseconds(timeout.nanoseconds)) { channel.close(promise: nil) }
        guard let lastFrame else {
            if mode == .close {
                deadline.cancel()
                channel.close(promise: nil)
            }
            return
        }
        channel.writeAndFlush(lastFrame).whenComplete { _ in
            switch mode {
            case .close:
                deadline.cancel()
                channel.close(promise: nil)
            case .halfClose:
                channel.close(mode: .output, promise: nil)
            case .awaitPeer:
                break
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
