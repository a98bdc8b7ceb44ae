import NIOCore

extension PeerTransceiver {
    /// Sends `payload` to `peer` and waits for its reply of type `R`.
    ///
    /// ```swift
    /// let reply = try await transceiver.request(ListItemsCommand(), to: peer, expecting: CLIResponse.self)
    /// ```
    /// The reply is matched to the request by id and accepted only from `peer`. A peer that is
    /// switching to the connection that won a tie-break is waited for, as by `send(_:to:)`.
    /// - Throws: ``PeerKitError/requestTimedOut(type:peer:timeout:)`` when no reply arrives in
    ///   time, ``PeerKitError/remoteError(reason:peer:)`` when the peer answers with an error
    ///   (no handler, a payload it could not decode, a handler that threw),
    ///   ``PeerKitError/unexpectedReply(expected:received:peer:)``,
    ///   ``PeerKitError/connectionClosed(peer:)``, ``PeerKitError/peerNotConnected(peer:)`` (or,
    ///   for a peer whose last connection ended badly and recently, that reason),
    ///   ``PeerKitError/payloadDecodingFailed(type:reason:)`` or `CancellationError`.
    public func request<T: Encodable, R: Decodable>(
        _ payload: T,
        to peer: Peer,
        expecting: R.Type,
        timeout: Duration = .seconds(5)
    ) async throws -> R {
        let expectedType = peerMessageType(of: R.self)
        _ = metrics.usedType(expectedType)  // the reply is counted under its own type key
        let id = nextRequestID()
        // Encoded straight into the request's frame, id and all.
        let reply = try await exchange(MessageCodec.encode(payload, id: id), id: id, with: peer, timeout: timeout)
        guard reply.type == expectedType else {
            throw PeerKitError.unexpectedReply(expected: expectedType, received: reply.type, peer: peer.name)
        }
        return try MessageCodec.decode(R.self, from: reply)
    }

    /// Sends `message` to `peer` as request `id` (``nextRequestID()``) and waits for the envelope
    /// that answers it: the part of a request that does not depend on the reply's type.
    ///
    /// Everything up to the send happens before the first suspension: the request is registered,
    /// its timeout set (its deadline fixed when the request is made) and its frame queued, so a
    /// reply, a cancellation or a timeout that comes before the caller waits is kept, not lost,
    /// and a test clock moved right after the call finds the timeout set.
    /// - Throws: ``PeerKitError/remoteError(reason:peer:)`` when the answer is an error, and the
    ///   other errors ``request(_:to:expecting:timeout:)`` lists.
    func exchange(_ message: EncodedMessage, id: String, with peer: Peer, timeout: Duration, group: String? = nil) async throws -> Envelope {
        let session = try runningSession()
        try session.manager.requireConnected(peer)
        // A request from a task cancelled already is not sent.
        try Task.checkCancellation()
        let pending = pending
        let manager = session.manager
        pending.register(id: id, peerID: peer.id, timeout: .init(after: timeout, eventLoop: manager.timerLoop) {
            PeerKitError.requestTimedOut(type: message.type, peer: peer.name, timeout: timeout, connectionDown: manager.isSuspended(peer.id))
        })
        defer { pending.remove(id: id) }
        let metrics = metrics
        let started = ContinuousClock.now
        // To the peer, on whichever connection is its own: queued at once unless its outbox is
        // over its high-water mark (then this waits, within the request's own timeout too).
        try await session.manager.send(message.frame(id: id, group: group), to: peer)
        metrics.usedType(message.type).sent(payloadBytes: message.payload.readableBytes)
        let reply: Envelope
        do {
            reply = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    if let ended = pending.attach(id: id, continuation: continuation) {
                        continuation.resume(with: ended)
                    }
                }
            } onCancel: {
                pending.fail(id: id, with: CancellationError())
            }
        } catch let error as PeerKitError {
            if error.code == .requestTimedOut { metrics.requestsTimedOut.increment() }
            throw error
        }
        metrics.requestDuration.recordNanoseconds((ContinuousClock.now - started).timeAmount.nanoseconds)
        if reply.type == EnvelopeType.error {
            let reason = (try? MessageCodec.decode(ErrorPayload.self, from: reply).reason) ?? "no reason given"
            throw PeerKitError.remoteError(reason: reason, peer: peer.name)
        }
        return reply
    }
}
