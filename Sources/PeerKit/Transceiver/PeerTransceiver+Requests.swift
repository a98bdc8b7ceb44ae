import NIOCore

extension PeerTransceiver {
    /// Sends `payload` to `peer` and waits for its reply of type `R`.
    ///
    /// ```swift
    /// let reply = try await transceiver.request(ListItemsCommand(), to: peer, expecting: CLIResponse.self)
    /// ```
    /// The reply is matched to the request by id and accepted only from `peer`.
    /// - Throws: ``PeerKitError/requestTimedOut(type:peer:timeout:)`` when no reply arrives in
    ///   time, ``PeerKitError/remoteError(reason:peer:)`` when the peer answers with an error
    ///   (no handler, a payload it could not decode, a handler that threw),
    ///   ``PeerKitError/unexpectedReply(expected:received:peer:)``,
    ///   ``PeerKitError/connectionClosed(peer:)``, ``PeerKitError/peerNotConnected(peer:)``,
    ///   ``PeerKitError/payloadDecodingFailed(type:reason:)`` or `CancellationError`.
    public func request<T: Encodable, R: Decodable>(
        _ payload: T,
        to peer: Peer,
        expecting: R.Type,
        timeout: Duration = .seconds(5)
    ) async throws -> R {
        let expectedType = peerMessageType(of: R.self)
        _ = metrics.usedType(expectedType)  // the reply is counted under its own type key
        let reply = try await exchange(MessageCodec.encode(payload), with: peer, timeout: timeout)
        guard reply.type == expectedType else {
            throw PeerKitError.unexpectedReply(expected: expectedType, received: reply.type, peer: peer.name)
        }
        return try MessageCodec.decode(R.self, from: reply.payload, syntaxChecked: true)
    }

    /// Sends `message` to `peer` as a request and waits for the envelope that answers it: the
    /// part of a request that does not depend on the reply's type.
    /// - Throws: ``PeerKitError/remoteError(reason:peer:)`` when the answer is an error, and the
    ///   other errors ``request(_:to:expecting:timeout:)`` lists.
    func exchange(_ message: EncodedMessage, with peer: Peer, timeout: Duration, group: String? = nil) async throws -> Envelope {
        let session = try runningSession()
        guard let connection = session.manager.connection(to: peer.id) else {
            throw PeerKitError.peerNotConnected(peer: peer.name)
        }
        let id = nextRequestID()
        let pending = pending
        let clock = clock
        pending.register(id: id, peerID: peer.id)
        defer { pending.remove(id: id) }
        let metrics = metrics
        let counters = metrics.usedType(message.type)
        let started = ContinuousClock.now
        let reply: Envelope
        do {
            reply = try await send(message, id: id, group: group, on: connection, to: peer, timeout: timeout, counters: counters)
        } catch let error as PeerKitError {
            if error.code == .requestTimedOut { metrics.requestsTimedOut.increment() }
            throw error
        }
        metrics.requestDuration.recordNanoseconds((ContinuousClock.now - started).timeAmount.nanoseconds)
        if reply.type == EnvelopeType.error {
            let reason = (try? MessageCodec.decode(ErrorPayload.self, from: reply.payload, syntaxChecked: true).reason) ?? "no reason given"
            throw PeerKitError.remoteError(reason: reason, peer: peer.name)
        }
        return reply
    }

    /// Sends the request registered as `id` and waits for what ends it: its reply, its timeout,
    /// its cancellation or its peer's disconnection.
    private func send(_ message: EncodedMessage, id: String, group: String?, on connection: PeerConnection, to peer: Peer, timeout: Duration, counters: PeerMetrics.TypeMetrics) async throws -> Envelope {
        let pending = pending
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if let failure = pending.attach(id: id, continuation: continuation) {
                    // Cancelled (or disconnected) before the request was sent: send nothing.
                    continuation.resume(throwing: failure)
                    return
                }
                let timer = clock.schedule(on: connection.channel.eventLoop, in: timeout) {
                    pending.fail(id: id, with: PeerKitError.requestTimedOut(type: message.type, peer: peer.name, timeout: timeout))
                }
                pending.setTimeout(id: id, timer)
                connection.send(message.frame(id: id, group: group))
                counters.sent(payloadBytes: message.payload.readableBytes)
            }
        } onCancel: {
            pending.fail(id: id, with: CancellationError())
        }
    }
}
