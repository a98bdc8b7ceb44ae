#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One connection on a ``TestNetwork``: the dialler's channel and the acceptor's channel, each
/// on one end of a Unix socket pair, with the network's relay in between:
///
/// ```
///  dialler's PeerKit channel ─ socketpair ─ relay ⇄ relay ─ socketpair ─ acceptor's PeerKit channel
///                                 (frames: dropped, delayed, held back, or passed on)
/// ```
final class TestLink: Sendable {
    let id: Int
    let dialler: Int
    let acceptor: Int
    private let network: TestNetwork

    private struct State {
        /// The relay's channel facing the dialler (it reads what the dialler sends) and the one
        /// facing the acceptor.
        var towardsDialler: (any Channel)?
        var towardsAcceptor: (any Channel)?
        /// Socket descriptors, for counting bytes in flight: the dialler's, the relay's two, the acceptor's.
        var descriptors: (dialler: CInt, relayDialler: CInt, relayAcceptor: CInt, acceptor: CInt) = (-1, -1, -1, -1)
        var closed = false
        /// The dialler's and the acceptor's channels, once made: the link is gone once both closed.
        var peers: [any Channel] = []
        /// Delayed frames per direction (true: from the dialler), with their due offsets, in order.
        var delayed: [Bool: [(due: Duration, frame: TestFrame)]] = [:]
        var pumping: Set<Bool> = []
        /// Frames that met a partition, per direction, in order: held, as TCP holds what it could
        /// not deliver and sends it again once the path is back, and passed on when the partition
        /// heals (``releaseHeld()``), unless the connection closed meanwhile.
        var held: [Bool: [TestFrame]] = [:]
        /// Sides whose end of output (a half-close after a bye) waits behind their delayed or held
        /// frames, as a FIN waits behind the data before it: passed on once the last of them is.
        var outputEndsAfterQueue: Set<Bool> = []
        /// A side (true: the dialler) that closed its socket while frames from it were still
        /// delayed or held: the link is cut once the last of them is passed on.
        var cutAfterQueueOf: Bool?
        /// The side (true: the dialler) whose address went away (``TestNetwork/changeAddress(of:)``):
        /// frames to it are dropped, and its end of output and its close are not passed on.
        var stranded: Bool?
    }

    private let state = NIOLockedValueBox(State())

    init(id: Int, network: TestNetwork, dialler: Int, acceptor: Int) {
        self.id = id
        self.network = network
        self.dialler = dialler
        self.acceptor = acceptor
    }

    /// Makes the two socket pairs and the four channels; succeeds once the dialler's channel is up.
    func open(diallerConfigure: @escaping @Sendable (any Channel) throws -> Void, acceptorConfigure: @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<Void> {
        let group = network.eventLoopGroup
        let eventLoop = group.next()
        let diallerPair: (CInt, CInt)
        let acceptorPair: (CInt, CInt)
        do {
            diallerPair = try Self.socketPair()
            do {
                acceptorPair = try Self.socketPair()
            } catch {
                close(diallerPair.0)
                close(diallerPair.1)
                throw error
            }
        } catch {
            network.linkClosed(id)
            return eventLoop.makeFailedFuture(error)
        }
        state.withLockedValue { $0.descriptors = (diallerPair.0, diallerPair.1, acceptorPair.1, acceptorPair.0) }

        @Sendable func relay(_ fd: CInt, fromDialler: Bool) -> EventLoopFuture<any Channel> {
            ClientBootstrap(group: group)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RawFrameDecoder()))
                        try channel.pipeline.syncOperations.addHandler(RelayHandler(link: self, fromDialler: fromDialler))
                    }
                }
                .withConnectedSocket(fd)
        }
        @Sendable func peer(_ fd: CInt, _ configure: @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<any Channel> {
            ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try configure(channel) }
                }
                .withConnectedSocket(fd)
        }

        let relays = relay(diallerPair.1, fromDialler: true).and(relay(acceptorPair.1, fromDialler: false))
        return relays.flatMap { channels in
            let (towardsDialler, towardsAcceptor) = channels
            let closed = self.state.withLockedValue { state -> Bool in
                state.towardsDialler = towardsDialler
                state.towardsAcceptor = towardsAcceptor
                return state.closed
            }
            if closed { self.cut() }
            self.updateReading()
            return peer(acceptorPair.0, acceptorConfigure).flatMap { acceptor in
                self.state.withLockedValue { $0.peers.append(acceptor) }
                return peer(diallerPair.0, diallerConfigure).map { dialler in
                    self.state.withLockedValue { $0.peers.append(dialler) }
                    // Until both ends have seen the connection end, it counts as in flight.
                    acceptor.closeFuture.and(dialler.closeFuture).whenComplete { _ in
                        self.network.linkClosed(self.id)
                    }
                }
            }
        }.flatMapErrorThrowing { error in
            // A side could not be set up: what was made is closed with the link.
            self.cut()
            throw error
        }
    }

    private static func socketPair() throws -> (CInt, CInt) {
        var descriptors: [CInt] = [-1, -1]
        #if canImport(Glibc)
        let type = CInt(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        #else
        let type = SOCK_STREAM
        #endif
        guard socketpair(AF_UNIX, type, 0, &descriptors) == 0 else {
            throw IOError(errnoCode: errno, reason: "socketpair")
        }
        return (descriptors[0], descriptors[1])
    }

    // MARK: Relaying

    /// The side (true: the dialler) lost its address: see ``TestNetwork/changeAddress(of:)``.
    func strand(dialler side: Bool) {
        state.withLockedValue { $0.stranded = side }
    }

    /// A frame the relay read: from the dialler when `fromDialler`, else from the acceptor.
    func relay(_ frame: TestFrame, fromDialler: Bool) {
        // To a side whose address went away: lost.
        if state.withLockedValue({ $0.stranded == !fromDialler }) { return }
        let (from, to) = fromDialler ? (dialler, acceptor) : (acceptor, dialler)
        let fate = network.fate(of: frame, from: from, to: to)
        if fate.drop { return }
        let now = network.now
        let (direct, startPump) = state.withLockedValue { state -> (Bool, Bool) in
            // Partitioned, or behind frames held by a partition that is healing: held, in order.
            if fate.hold || state.held[fromDialler]?.isEmpty == false {
                state.held[fromDialler, default: []].append(frame)
                return (false, false)
            }
            let queue = state.delayed[fromDialler] ?? []
            guard fate.delay != nil || !queue.isEmpty else { return (true, false) }
            // Behind a delayed frame, or delayed itself: queued, so that order is kept.
            state.delayed[fromDialler, default: []].append((now + (fate.delay ?? .zero), frame))
            return (false, state.pumping.insert(fromDialler).inserted)
        }
        if direct {
            write(frame, fromDialler: fromDialler)
        } else if startPump {
            pump(fromDialler: fromDialler)
        }
    }

    private func write(_ frame: TestFrame, fromDialler: Bool) {
        let destination = state.withLockedValue { fromDialler ? $0.towardsAcceptor : $0.towardsDialler }
        destination?.writeAndFlush(frame.bytes, promise: nil)
    }

    /// The partition between the link's ends healed: what it held goes on now, in order, behind
    /// any frame still delayed. Nothing, when the connection closed meanwhile.
    func releaseHeld() {
        let now = network.now
        let starts = state.withLockedValue { state -> [Bool] in
            defer { state.held = [:] }
            guard !state.closed else { return [] }
            var starts: [Bool] = []
            for (fromDialler, frames) in state.held where !frames.isEmpty {
                state.delayed[fromDialler, default: []].append(contentsOf: frames.map { (now, $0) })
                if state.pumping.insert(fromDialler).inserted { starts.append(fromDialler) }
            }
            return starts
        }
        for fromDialler in starts { pump(fromDialler: fromDialler) }
    }

    /// Passes delayed frames on when the network's clock reaches them. A frame due and not yet
    /// passed on counts as in flight (``hasDueFrames``), however slow the pump's task is.
    private func pump(fromDialler: Bool) {
        let clock = network.clock
        Task {
            while true {
                guard let due = state.withLockedValue({ state -> Duration? in
                    guard let first = state.delayed[fromDialler]?.first, !state.closed else {
                        state.pumping.remove(fromDialler)
                        state.delayed[fromDialler] = nil
                        return nil
                    }
                    return first.due
                }) else { return }
                do { try await clock.sleep(until: NetworkClock.Instant(offset: due)) } catch { return }
                guard let destination = state.withLockedValue({ fromDialler ? $0.towardsAcceptor : $0.towardsDialler }) else { return }
                // On the destination's event loop, the frame is written and then taken off the
                // queue, in one step. Until then it counts as due, and a frame the relay reads
                // meanwhile queues behind it. Taken off first, or written from this task (which
                // only queues the write on the loop), a frame read meanwhile would find the
                // queue empty and be written before it.
                do {
                    try await destination.eventLoop.submit { self.passOnFirstDelayed(fromDialler: fromDialler) }.get()
                } catch {
                    return
                }
            }
        }
    }

    /// Writes the first delayed frame from one side, then takes it off the queue. Call on the
    /// destination's event loop.
    private func passOnFirstDelayed(fromDialler: Bool) {
        guard let frame = state.withLockedValue({ $0.delayed[fromDialler]?.first?.frame }) else { return }
        write(frame, fromDialler: fromDialler)
        let (endOutput, cutLink) = state.withLockedValue { state -> (Bool, Bool) in
            if state.delayed[fromDialler]?.isEmpty == false { state.delayed[fromDialler]?.removeFirst() }
            guard Self.drained(state, from: fromDialler) else { return (false, false) }
            let cutLink = state.cutAfterQueueOf == fromDialler
            if cutLink { state.cutAfterQueueOf = nil }
            return (state.outputEndsAfterQueue.remove(fromDialler) != nil, cutLink)
        }
        if endOutput { endOutputNow(fromDialler: fromDialler) }
        if cutLink { cut() }
    }

    /// Whether no frame from one side (true: the dialler) waits, delayed or held.
    private static func drained(_ state: State, from fromDialler: Bool) -> Bool {
        state.delayed[fromDialler]?.isEmpty != false && state.held[fromDialler]?.isEmpty != false
    }

    /// The relay's channel to one side (true: the dialler) closed: that side's socket closed
    /// (or failed). The link is cut, as a TCP connection ends; behind frames from that side
    /// still delayed or held, once they are passed on (its FIN, or reset, travels behind them).
    func sideClosed(fromDialler: Bool) {
        let now = state.withLockedValue { state -> Bool in
            if state.stranded == fromDialler {
                // Its close never reaches the other side, which ends the link when it closes
                // its own end. The relay's descriptor on this side is closed: not counted again.
                if fromDialler { state.descriptors.relayDialler = -1 } else { state.descriptors.relayAcceptor = -1 }
                return false
            }
            guard !state.closed, !Self.drained(state, from: fromDialler) else { return true }
            state.cutAfterQueueOf = fromDialler
            return false
        }
        if now { cut() }
    }

    /// Reads from a side only while the network lets its reader read and the other side can take the bytes.
    func updateReading() {
        let (towardsDialler, towardsAcceptor) = state.withLockedValue { ($0.towardsDialler, $0.towardsAcceptor) }
        guard let towardsDialler, let towardsAcceptor else { return }
        let diallerSends = !network.isReadingStopped(from: dialler, to: acceptor) && towardsAcceptor.isWritable
        let acceptorSends = !network.isReadingStopped(from: acceptor, to: dialler) && towardsDialler.isWritable
        towardsDialler.setOption(.autoRead, value: diallerSends).whenSuccess { if diallerSends { towardsDialler.read() } }
        towardsAcceptor.setOption(.autoRead, value: acceptorSends).whenSuccess { if acceptorSends { towardsAcceptor.read() } }
    }

    /// A side ended its output (a half-close after a bye): the other side sees end of input.
    /// Behind frames still delayed or held from that side, it waits for the last of them to be
    /// passed on (a FIN comes after the data before it).
    func inputClosed(fromDialler: Bool) {
        let now = state.withLockedValue { state -> Bool in
            // A side whose address went away: its FIN is lost.
            if state.stranded == fromDialler { return false }
            guard !Self.drained(state, from: fromDialler) else { return true }
            state.outputEndsAfterQueue.insert(fromDialler)
            return false
        }
        if now { endOutputNow(fromDialler: fromDialler) }
    }

    private func endOutputNow(fromDialler: Bool) {
        let destination = state.withLockedValue { fromDialler ? $0.towardsAcceptor : $0.towardsDialler }
        destination?.close(mode: .output, promise: nil)
    }

    /// Closes the relay's channels: both sides see the connection end, without a bye.
    ///
    /// Each side sees end of input, never a reset: a Unix socket closed with unread bytes makes
    /// its peer's next read fail with ECONNRESET, so what the relay has not read yet is read and
    /// dropped first, on the relay's event loop (where, with the network's one event loop, no
    /// side can write in between).
    func cut() {
        let relays = state.withLockedValue { state -> [(channel: any Channel, descriptor: CInt)] in
            state.closed = true
            return [(state.towardsDialler, state.descriptors.relayDialler), (state.towardsAcceptor, state.descriptors.relayAcceptor)]
                .compactMap { channel, descriptor in channel.map { ($0, descriptor) } }
        }
        for (channel, descriptor) in relays {
            channel.eventLoop.execute {
                // Only while the channel is open does it own the descriptor (a closed one's
                // number may belong to another socket by now).
                if channel.isActive { Self.discardUnread(descriptor) }
                channel.close(promise: nil)
            }
        }
        let peers = state.withLockedValue { $0.peers }
        if peers.count < 2 {
            // Not fully set up: nothing will report both ends closed.
            network.linkClosed(id)
        }
    }

    /// Closes the relay's channels and both ends' channels: for ``TestNetwork/shutdown()``,
    /// which must not wait on an end that does not notice.
    func closeEverything() {
        let channels = state.withLockedValue { state -> [any Channel] in
            state.closed = true
            return [state.towardsDialler, state.towardsAcceptor].compactMap { $0 } + state.peers
        }
        for channel in channels { channel.close(promise: nil) }
        network.linkClosed(id)
    }

    /// How long until the next delayed frame is due (zero when one is due already); nil when no
    /// frame is held.
    var timeUntilNextFrame: Duration? {
        let now = network.now
        return state.withLockedValue { state in
            guard !state.closed else { return nil }
            return state.delayed.values.compactMap { $0.first?.due }.min().map { max(.zero, $0 - now) }
        }
    }

    /// Whether a delayed frame is due and has not been passed on yet.
    var hasDueFrames: Bool {
        let now = network.now
        return state.withLockedValue { state in
            !state.closed && state.delayed.values.contains { $0.first.map { $0.due <= now } ?? false }
        }
    }

    /// Whether bytes wait to be read on a socket whose reader is reading, a delayed frame is
    /// due, or the link was cut and an end has not yet seen it end.
    var hasBytesInFlight: Bool {
        let (descriptors, closed, due, peers) = state.withLockedValue { state in
            let now = network.now
            let due = state.delayed.values.contains { $0.first.map { $0.due <= now } ?? false }
            var descriptors = state.descriptors
            // What waits to be read by a side whose address went away is lost, and its socket
            // may have closed (its number reused) while the link stays up.
            if state.stranded == true { descriptors.dialler = -1 }
            if state.stranded == false { descriptors.acceptor = -1 }
            return (descriptors, state.closed, due, state.peers)
        }
        if closed { return peers.contains { $0.isActive } }
        if due { return true }
        let diallerSends = !network.isReadingStopped(from: dialler, to: acceptor)
        let acceptorSends = !network.isReadingStopped(from: acceptor, to: dialler)
        return Self.unread(descriptors.dialler) > 0
            || Self.unread(descriptors.acceptor) > 0
            || (diallerSends && Self.unread(descriptors.relayDialler) > 0)
            || (acceptorSends && Self.unread(descriptors.relayAcceptor) > 0)
    }

    /// Reads and drops whatever waits to be read on the non-blocking `descriptor`.
    private static func discardUnread(_ descriptor: CInt) {
        guard descriptor >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while buffer.withUnsafeMutableBytes({ recv(descriptor, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT)) }) > 0 {}
    }

    /// Bytes waiting to be read on `descriptor` (0 when it is closed).
    private static func unread(_ descriptor: CInt) -> Int {
        guard descriptor >= 0 else { return 0 }
        var count: CInt = 0
        let result = withUnsafeMutablePointer(to: &count) { ioctl(descriptor, UInt(FIONREAD), $0) }
        return result == 0 ? Int(count) : 0
    }
}

/// The relay's handler on one of its two channels: passes each frame to the link.
final class RelayHandler: ChannelInboundHandler {
    typealias InboundIn = TestFrame

    private let link: TestLink
    private let fromDialler: Bool

    init(link: TestLink, fromDialler: Bool) {
        self.link = link
        self.fromDialler = fromDialler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        link.relay(unwrapInboundIn(data), fromDialler: fromDialler)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            link.inputClosed(fromDialler: fromDialler)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        link.updateReading()
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // One side closed: so does the other, as a TCP connection would.
        link.sideClosed(fromDialler: fromDialler)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
