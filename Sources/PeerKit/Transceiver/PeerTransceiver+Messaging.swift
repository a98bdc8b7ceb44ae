extension PeerTransceiver {
    /// Registers `handler` for messages of type `T`, replacing any earlier handler for its wire key.
    ///
    /// ```swift
    /// transceiver.receive(SomeCodableThing.self) { payload in
    ///     print("Got my thing! \(payload)")
    /// }
    /// ```
    /// Handlers run one at a time, in the order messages arrived. A payload that does not decode
    /// as `T` is logged (and answered with `peerkit.error` when the sender asked for a reply).
    public func receive<T: Decodable & SendableMetatype>(_ type: T.Type, using handler: @escaping @Sendable (T) async -> Void) {
        receive(type) { (value: T, _: Peer) in await handler(value) }
    }

    /// Registers `handler` for messages of type `T`; `sender` is the peer of the connection the
    /// message arrived on (never taken from the message itself).
    public func receive<T: Decodable & SendableMetatype>(_ type: T.Type, using handler: @escaping @Sendable (T, _ sender: Peer) async -> Void) {
        let key = peerMessageType(of: T.self)
        _ = metrics.usedType(key)  // from now on, messages of this key are counted under it
        let decode = MessageCodec.decoder(for: T.self)
        registry.register(key, .init { envelope, sender in
            let value = try decode(envelope)
            await handler(value, sender)
            return nil
        })
    }

    /// Registers a request handler: the value it returns is sent to the requester only, as the
    /// reply to its ``request(_:to:expecting:timeout:)``. An error it throws is sent back as
    /// `peerkit.error` and thrown from the requester's call as ``PeerKitError/remoteError(reason:peer:)``.
    ///
    /// ```swift
    /// transceiver.respond(to: ListItemsCommand.self) { command, sender in
    ///     CLIResponse.message(store.listing())
    /// }
    /// ```
    public func respond<T: Decodable & SendableMetatype, R: Encodable & SendableMetatype>(to type: T.Type, using handler: @escaping @Sendable (T, _ sender: Peer) async throws -> R) {
        let key = peerMessageType(of: T.self)
        _ = metrics.usedType(key)  // from now on, messages of this key are counted under it
        let decode = MessageCodec.decoder(for: T.self)
        registry.register(key, .init { envelope, sender in
            let value = try decode(envelope)
            let reply = try await handler(value, sender)
            // Framed as the answer to the request's id, as the dispatcher sends it.
            return try MessageCodec.encode(reply, replyTo: envelope.id)
        })
    }

    /// Registers a request handler that answers as the request is read, on the connection's
    /// event loop: no task, no hand-off to another thread, on either side of the handler.
    ///
    /// ```swift
    /// let prices = Mutex<[String: Double]>([:])  // import Synchronization
    /// transceiver.respondImmediately(to: PriceQuery.self) { query, sender in
    ///     PriceQuote(price: prices.withLock { $0[query.symbol] })
    /// }
    /// ```
    /// For handlers that answer at once from what they hold (a lookup, a counter, a copy): the
    /// handler is synchronous and must not block or wait, because while it runs the event loop
    /// reads, writes and heartbeats no connection of its own. A handler that waits, for a lock
    /// held long, a file or another peer, belongs in ``respond(to:using:)``, which runs off the
    /// event loops. One that holds the event loop longer than 50 ms is named in a warning in the
    /// log, once per wire key.
    ///
    /// The guarantees of the other handlers hold: handlers of one transceiver run one at a time,
    /// and a peer's messages in the order they arrived. A request is answered where it is read
    /// only when no handler is running and nothing of its peer waits to be handled; otherwise
    /// it waits its turn like any message, and the dispatcher's task calls the handler. Replies,
    /// errors and timeouts are those of ``respond(to:using:)``: an error the handler throws is
    /// sent back as `peerkit.error`.
    public func respondImmediately<T: Decodable & SendableMetatype, R: Encodable & SendableMetatype>(to type: T.Type, using handler: @escaping @Sendable (T, _ sender: Peer) throws -> R) {
        let key = peerMessageType(of: T.self)
        _ = metrics.usedType(key)  // from now on, messages of this key are counted under it
        let decode = MessageCodec.decoder(for: T.self)
        registry.register(key, .init(immediately: { envelope, sender in
            let value = try decode(envelope)
            return try MessageCodec.encode(handler(value, sender), replyTo: envelope.id)
        }))
    }

    /// Removes the handler for `T`'s wire key.
    public func stopReceiving<T>(_ type: T.Type) {
        registry.remove(peerMessageType(of: T.self))
    }

    /// Sends `payload` to every connected peer, fire and forget.
    ///
    /// The payload is encoded once for all peers. A peer that is switching to the connection that
    /// won a tie-break (both peers dialled each other) gets it on that connection once it is up.
    /// A payload that cannot be encoded, or a transceiver that is not running, is logged and
    /// published as ``PeerEvent/error(_:)``.
    public func broadcast<T: Encodable>(_ payload: T) {
        do {
            let session = try runningSession()
            let message = try MessageCodec.encode(payload)
            // Also to a peer switching to the connection that won a tie-break: held for it.
            let count = session.manager.broadcast(message.frame())
            metrics.usedType(message.type).sent(payloadBytes: message.payload.readableBytes, count: count)
        } catch {
            let error = error as? PeerKitError ?? .encodingFailed(type: peerMessageType(of: T.self), reason: "\(error)")
            logger.warning("Broadcast failed: \(error)")
            hub.publish(.error(error))
        }
    }

    /// Sends `payload` to each of `peers`.
    ///
    /// Nothing is sent unless every peer is connected. Returns once the payload is queued for
    /// every peer, in order after what was sent to it before: per peer, messages arrive in the
    /// order sent and at most once, whichever connection carries them (a peer that is switching
    /// to the connection that won a tie-break, because both peers dialled each other, gets it on
    /// the winner). When a peer's outbox is over its high-water mark the call first waits for the
    /// peer to read, so a loop of sends is paced by the slowest receiver; a peer that reads
    /// nothing for ``PeerConfiguration/slowPeerGracePeriod`` is disconnected as too slow.
    /// - Throws: ``PeerKitError/peerNotConnected(peer:)``, ``PeerKitError/encodingFailed(type:reason:)``,
    ///   ``PeerKitError/notRunning``, ``PeerKitError/peerTooSlow(peer:queuedBytes:limit:grace:)``
    ///   for a peer that does not read, or why a peer's connection ended while waiting. For a
    ///   peer whose last connection ended badly (recently), that reason, not
    ///   ``PeerKitError/peerNotConnected(peer:)``.
    public func send<T: Encodable>(_ payload: T, to peers: [Peer]) async throws {
        let session = try runningSession()
        // A lone peer is not looked up up front: its send throws the same error.
        if peers.count > 1 { try session.manager.requireConnected(peers) }
        let message: EncodedMessage
        do {
            message = try MessageCodec.encode(payload)
        } catch {
            // A peer that is not connected is named first, whatever the payload.
            try session.manager.requireConnected(peers)
            throw error
        }
        try await send(message, to: peers, in: session)
    }

    /// Queues `message` for each of `peers` in turn, waiting while a peer's outbox is over its
    /// high-water mark; the callers have checked that all of them were connected (or there is one).
    func send(_ message: EncodedMessage, to peers: [Peer], in session: TransceiverSession) async throws(PeerKitError) {
        let frame = message.frame()
        let counters = metrics.usedType(message.type)
        for peer in peers {
            try await session.manager.send(frame, to: peer)
            counters.sent(payloadBytes: message.payload.readableBytes)
        }
    }
}
