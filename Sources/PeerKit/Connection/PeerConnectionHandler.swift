import NIOCore

/// Drives a ``ConnectionStateMachine`` for one channel: feeds it frames and heartbeat ticks,
/// performs the actions it returns, and reports to the ``PeerConnectionDelegate``.
///
/// Time comes from the channel's event loop (`eventLoop.now`), so tests on an
/// `EmbeddedEventLoop` drive heartbeats and timeouts by advancing its clock.
final class PeerConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private var stateMachine: ConnectionStateMachine
    private let delegate: any PeerConnectionDelegate
    private let makeConnection: (any Channel) -> PeerConnection
    private var connection: PeerConnection?
    private var heartbeatTask: RepeatedTask?
    private var closeError: PeerKitError?
    private var byeReason: String?
    /// Set once the delegate has been told the connection closed.
    private var reportedClosed = false

    init(configuration: ConnectionStateMachine.Configuration, delegate: any PeerConnectionDelegate, makeConnection: @escaping (any Channel) -> PeerConnection) {
        self.stateMachine = ConnectionStateMachine(configuration: configuration)
        self.delegate = delegate
        self.makeConnection = makeConnection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { activate(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        activate(context: context)
        context.fireChannelActive()
    }

    private func activate(context: ChannelHandlerContext) {
        guard connection == nil else { return }
        let connection = makeConnection(context.channel)
        self.connection = connection
        perform(stateMachine.activated(now: context.eventLoop.now), context: context)
        let interval = stateMachine.configuration.heartbeatInterval
        let loopBoundSelf = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        heartbeatTask = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let handler = loopBoundSelf.value
            let context = loopBoundContext.value
            handler.perform(handler.stateMachine.heartbeat(now: context.eventLoop.now), context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let action: ConnectionStateMachine.Action
        do {
            let envelope = try EnvelopeParser.parse(frame)
            action = stateMachine.frameReceived(envelope, now: context.eventLoop.now)
        } catch {
            action = stateMachine.frameRejected(error)
        }
        perform(action, context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if stateMachine.isClosed, connection?.isClosedLocally == true {
            // Closing after a protocol error: what the peer still sends is dropped.
            return
        }
        if let refusal = error as? PeerKitError, refusal.isSecurityRefusal {
            // From the security handlers (Wire/TLS): the peer is refused before any frame was read.
            if closeError == nil { closeError = refusal }
            context.close(promise: nil)
        } else if let wireError = error as? WireError {
            perform(stateMachine.frameRejected(wireError), context: context)
        } else {
            if closeError == nil, !stateMachine.isClosed {
                closeError = .malformedFrame(reason: "the connection failed (\(error))", peer: connection?.description ?? "the peer")
            }
            context.close(promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection?.writabilityChanged(isWritable: context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        heartbeatTask?.cancel()
        heartbeatTask = nil
        if let connection {
            connection.channelClosed()
            if closeError == nil, byeReason == nil, !stateMachine.isClosed, !connection.isClosedLocally, stateMachine.remoteHello != nil {
                closeError = .connectionClosed(peer: connection.description)
            }
            _ = stateMachine.closeRequested()
            reportClosed(connection)
        }
        context.fireChannelInactive()
    }

    /// Tells the delegate, once, that the connection is over: when the socket closes, or as soon
    /// as a protocol error ends it (the socket lingers a moment so the peer can read why).
    private func reportClosed(_ connection: PeerConnection) {
        guard !reportedClosed else { return }
        reportedClosed = true
        delegate.connectionClosed(connection, error: closeError, byeReason: byeReason)
    }

    private func perform(_ action: ConnectionStateMachine.Action, context: ChannelHandlerContext) {
        guard let connection else { return }
        switch action {
        case .none:
            break
        case let .send(frame):
            connection.send(frame.encode(allocator: context.channel.allocator), urgent: frame.isHeartbeat)
        case let .established(hello):
            connection.setRemote(hello)
            delegate.connectionEstablished(connection, remote: hello)
        case let .deliver(envelope):
            delegate.connection(connection, received: envelope)
        case let .fail(failure):
            closeError = failure.error(peer: connection.description)
            if case .timedOut = failure {
                context.close(promise: nil)
            } else {
                let sentence = "Closing the connection: " + failure.reason + "."
                let frame = ConnectionStateMachine.ControlFrame.error(reason: sentence, replyTo: nil)
                connection.fail(with: frame.encode(allocator: context.channel.allocator))
                reportClosed(connection)
            }
        case let .close(byeReason):
            self.byeReason = byeReason ?? ""
            connection.close(after: nil)
        case let .peerReportedError(reason):
            // The peer closes next; its reason is why the connection ends.
            let error = PeerKitError.remoteError(reason: reason, peer: connection.description)
            if closeError == nil { closeError = error }
            delegate.connection(connection, reported: error)
        }
    }
}
