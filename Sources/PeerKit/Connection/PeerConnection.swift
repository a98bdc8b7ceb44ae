import NIOConcurrencyHelpers
import NIOCore

/// A handle on one TCP connection to a peer, safe to use from any thread.
///
/// **Outbound.** Frames to send wait in an outbox and are written on the channel's event loop in
/// batches: the first frame queued in a tick schedules one drain, which writes and flushes once.
/// Data frames move to the channel only while it is writable, so a backlog waits here rather than
/// in the socket's buffers, and urgent frames (pings and pongs) overtake it. Resource chunks
/// (``sendBulk(_:data:)``) come last: one is written only when no other frame waits, and each sender
/// may have only one chunk waiting, so a message queued during a large transfer waits for at most
/// the one chunk being written. ``waitUntilWritable()``
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
    /// Where the send queue's depth and the bytes written are counted.
    let metrics: PeerMetrics
    /// Times the deadline for closing.
    let clock: PeerClock

    /// Above this many queued bytes, ``waitUntilWritable()`` waits…
    static let outboxHighWatermark = 1 << 20
    /// …until the outbox is down to this many.
    static let outboxLowWatermark = 1 << 18

    /// Asks the connection's handler to do something on its event loop
    /// (sent with `triggerUserOutboundEvent`).
    enum Request: Sendable {
        /// Close for this reason (``ConnectionStateMachine/CloseReason/stopped``, `.duplicate`,
        /// `.refused`, or `.failed` for a peer the layer above found misbehaving).
        case close(ConnectionStateMachine.CloseReason)
        /// The inbound backlog is handled: read again.
        case resumeReading
        /// The layer above found the peer breaking the protocol: fail the connection with this
        /// reason (a sentence fragment), sending it as `peerkit.error`.
        case fail(String)
    }

    private struct State {
        var queued = CircularBuffer<ByteBuffer>()
        var queuedBytes = 0
        var urgent: [ByteBuffer] = []
        /// Resource chunks: written only when nothing else waits; at most one at a time. A chunk
        /// is its frame's head and its data, written one after the other (the data is not
        /// copied behind the head).
        var bulk: (head: ByteBuffer, data: ByteBuffer?)?
        var bulkWaiters: [CheckedContinuation<Void, Never>] = []
        var drainScheduled = false
        /// The peer's hello: the one place it is kept.
        var remote: Hello?
        /// Certificates mode: the SHA-256 fingerprint of the peer's verified public key.
        var fingerprint: String?
        var closed = false
        /// Why the connection ended, once it did.
        var closeError: PeerKitError?
        var writabilityWaiters: [CheckedContinuation<Void, Never>] = []
        var inboundBytes = 0
        var readingPaused = false
    }

    private let state = NIOLockedValueBox(State())

    init(channel: any Channel, direction: TieBreak.Direction, serviceKey: String?, maximumQueuedInboundBytes: Int = 4 << 20, metrics: PeerMetrics = .disabled, clock: PeerClock = .continuous) {
        self.metrics = metrics
        self.channel = channel
        self.clock = clock
        self.direction = direction
        self.serviceKey = serviceKey
        self.maximumQueuedInboundBytes = maximumQueuedInboundBytes
        self.remoteDescription = channel.remoteAddress.map(PeerConnection.describe) ?? "an unknown address"
    }

    /// The peer's hello, once the handshake completed.
    var remote: Hello? { state.withLockedValue { $0.remote } }

    /// The peer at the other end, once the handshake completed (made from its hello and, in
    /// certificates mode, its verified fingerprint).
    var peer: Peer? {
        let (remote, fingerprint) = state.withLockedValue { ($0.remote, $0.fingerprint) }
        return remote.map { hello in
            Peer(id: hello.peerID, name: hello.name, discoveryInfo: hello.discoveryInfo ?? [:], isConnected: true, fingerprint: fingerprint)
        }
    }

    /// Bytes waiting in the outbox.
    var queuedOutboundBytes: Int { state.withLockedValue { $0.queuedBytes } }

    /// Why the connection ended, once it ended badly.
    var closeError: PeerKitError? {
        // `description` takes the lock itself: read the state first, describe after.
        let (closed, error) = state.withLockedValue { ($0.closed, $0.closeError) }
        guard closed else { return nil }
        return error ?? .connectionClosed(peer: description)
    }

    /// Whether the connection ended.
    var isClosed: Bool { state.withLockedValue { $0.closed } }

    /// Asks the handler to fail the connection: the peer broke the protocol (`reason` is a
    /// sentence fragment sent to it in `peerkit.error`). Safe from any thread.
    func fail(_ reason: String) {
        channel.triggerUserOutboundEvent(Request.fail(reason), promise: nil)
    }

    /// Whether reading is paused because this peer's messages wait for their handlers.
    var isReadingPaused: Bool { state.withLockedValue { $0.readingPaused } }

    /// Records the peer's hello once the handshake completed and, in certificates mode, its
    /// verified public-key fingerprint.
    func setRemote(_ hello: Hello, fingerprint: String? = nil) {
        state.withLockedValue {
            $0.remote = hello
            $0.fingerprint = fingerprint
        }
    }

    /// Records the peer's new name; returns its hello as it now is (nil before the handshake).
    func rename(to name: String) -> Hello? {
        state.withLockedValue { state in
            state.remote?.name = name
            return state.remote
        }
    }

    /// Whether the peer's hello listed the optional protocol `feature`.
    func supports(_ feature: String) -> Bool {
        remote?.supports(feature) ?? false
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
        let (queued, scheduleDrain) = state.withLockedValue { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            if urgent {
                state.urgent.append(frame)
            } else {
                state.queued.append(frame)
                state.queuedBytes += frame.readableBytes
            }
            if state.drainScheduled { return (true, false) }
            state.drainScheduled = true
            return (true, true)
        }
        if queued, !urgent { metrics.sendQueueBytes.increment(by: Double(frame.readableBytes)) }
        if scheduleDrain {
            channel.eventLoop.execute { self.drain() }
        }
    }

    /// Queues a frame of a resource transfer (a chunk, or the end that must follow the chunks),
    /// first waiting until the one queued before it (by any
    /// transfer on this connection) has been written. Chunks go out only when no other frame
    /// waits, so pings, control frames and messages overtake them.
    /// - Throws: why the connection ended, when it ends before (or while) waiting.
    ///
    /// `frame` is the whole frame, or, with `data`, its beginning: `data` is written right after
    /// it, as the rest of the frame.
    func sendBulk(_ frame: ByteBuffer, data: ByteBuffer? = nil) async throws(PeerKitError) {
        while true {
            let outcome = state.withLockedValue { state -> (queued: Bool, scheduleDrain: Bool) in
                guard !state.closed, state.bulk == nil else { return (false, false) }
                state.bulk = (frame, data)
                if state.drainScheduled { return (true, false) }
                state.drainScheduled = true
                return (true, true)
            }
            if outcome.scheduleDrain { channel.eventLoop.execute { self.drain() } }
            if outcome.queued { return }
            if let error = closeError { throw error }
            await withCheckedContinuation { continuation in
                let waiting = state.withLockedValue { state -> Bool in
                    guard state.bulk != nil, !state.closed else { return false }
                    state.bulkWaiters.append(continuation)
                    return true
                }
                if !waiting { continuation.resume() }
            }
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
        if let error = closeError {
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
        let (waiters, dropped) = state.withLockedValue { state -> ([CheckedContinuation<Void, Never>], Int) in
            if !state.closed { state.closeError = error }
            state.closed = true
            let dropped = state.queuedBytes
            state.queued.removeAll()
            state.queuedBytes = 0
            state.urgent.removeAll()
            state.bulk = nil
            defer {
                state.writabilityWaiters = []
                state.bulkWaiters = []
            }
            return (state.writabilityWaiters + state.bulkWaiters, dropped)
        }
        if dropped > 0 { metrics.sendQueueBytes.decrement(by: Double(dropped)) }
        for waiter in waiters { waiter.resume() }
    }

    /// Writes urgent frames, then data frames while the channel is writable (every one when
    /// `everything`), and flushes once. Runs on the event loop.
    func drain(everything: Bool = false) {
        var wrote = false
        var wroteBytes = 0
        var dequeuedBytes = 0
        var released: [CheckedContinuation<Void, Never>] = []
        var frames = 0
        var more = false
        while true {
            let next = state.withLockedValue { state -> (ByteBuffer, ByteBuffer?)? in
                if !state.urgent.isEmpty { return (state.urgent.removeFirst(), nil) }
                if !everything, frames >= Self.framesPerDrain, !state.queued.isEmpty {
                    // Enough for one turn: the rest goes in a later task, so that a long backlog
                    // (a broadcast to many peers) does not hold the event loop from reading and
                    // from the other connections' pings and data. drainScheduled stays set.
                    more = true
                    return nil
                }
                if state.queued.isEmpty, everything || channel.isWritable, let chunk = state.bulk {
                    state.bulk = nil
                    released += state.bulkWaiters
                    state.bulkWaiters = []
                    return (chunk.head, chunk.data)
                }
                guard everything || channel.isWritable, let frame = state.queued.popFirst() else {
                    state.drainScheduled = false
                    if state.queuedBytes <= Self.outboxLowWatermark {
                        released += state.writabilityWaiters
                        state.writabilityWaiters = []
                    }
                    return nil
                }
                state.queuedBytes -= frame.readableBytes
                dequeuedBytes += frame.readableBytes
                frames += 1
                return (frame, nil)
            }
            guard let (frame, rest) = next else { break }
            wroteBytes += frame.readableBytes
            channel.write(frame, promise: nil)
            if let rest {
                wroteBytes += rest.readableBytes
                channel.write(rest, promise: nil)
            }
            wrote = true
        }
        if wrote { channel.flush() }
        if dequeuedBytes > 0 { metrics.sendQueueBytes.decrement(by: Double(dequeuedBytes)) }
        if wroteBytes > 0 { metrics.wireBytesSent.increment(by: wroteBytes) }
        for waiter in released { waiter.resume() }
        if more { channel.eventLoop.execute { self.drain() } }
    }

    /// The most data frames one ``drain(everything:)`` writes before it lets the event loop turn.
    static let framesPerDrain = 256

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
            let dropped = state.withLockedValue { state -> Int in
                defer { state.queued.removeAll(); state.queuedBytes = 0; state.bulk = nil }
                return state.queuedBytes
            }
            if dropped > 0 { metrics.sendQueueBytes.decrement(by: Double(dropped)) }
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
        metrics.wireBytesSent.increment(by: lastFrame.readableBytes)
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
            // A socket pair's ends (a test network's connections) have no path.
            guard let path = address.pathname, !path.isEmpty else { return "an unnamed Unix socket" }
            return path
        }
    }
}
