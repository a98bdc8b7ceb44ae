extension PeerTransceiver {
    /// Starts sending a resource (a file, or a sequence of byte chunks) of any size to `peer`,
    /// and returns at once with a handle on the transfer. Only while the peer switches to the
    /// connection that won a tie-break (two peers that dialled each other at the same time) does
    /// it wait, for that connection, at most ``PeerConfiguration/handshakeTimeout``, as
    /// `send(_:to:)` does.
    ///
    /// ```swift
    /// let transfer = try await transceiver.send(resource: .file(URL(filePath: "dump.sqlite")), named: "store", to: peer)
    /// for await step in transfer.progress {
    ///     print("\(step.bytesDone) of \(step.totalBytes ?? 0) bytes, \(Int(step.bytesPerSecond)) B/s")
    /// }
    /// try await transfer.finished()
    /// ```
    ///
    /// The peer's handler for `name` (``receiveResources(named:using:)``) gets the bytes in
    /// chunks; the transfer completes when it has read them all and their SHA-256 digest matches.
    /// Chunks are interleaved with other traffic to the peer: a message, request or ping waits
    /// for at most one chunk (``PeerConfiguration/resourceChunkLength``). Memory stays bounded by
    /// the receiver's window (``PeerConfiguration/resourceWindowBytes``) whatever the size.
    ///
    /// - Throws: ``PeerKitError/peerNotConnected(peer:)`` (or why its last connection ended),
    ///   ``PeerKitError/featureNotSupported(feature:peer:)`` for a peer that does not take part in
    ///   the `resources` feature, ``PeerKitError/notRunning``. Failures later in the transfer are
    ///   thrown by ``OutgoingResource/finished()``.
    public func send(resource source: ResourceSource, named name: String, to peer: Peer) async throws -> OutgoingResource {
        let session = try runningSession()
        guard let connection = await session.manager.connectionAfterSwitch(to: peer.id) else {
            throw session.manager.recentFailure(of: peer.id) ?? PeerKitError.peerNotConnected(peer: peer.name)
        }
        return try session.resources.send(source, named: name, to: peer, on: connection)
    }

    /// Registers `handler` for resources named `name`, replacing any earlier one. Each incoming
    /// resource runs its own handler, concurrently with messages and with other resources (at
    /// most ``PeerConfiguration/maximumConcurrentIncomingResources`` at once).
    ///
    /// ```swift
    /// transceiver.receiveResources(named: "store") { resource in
    ///     try await resource.write(to: URL(filePath: "/var/lib/app/incoming.sqlite"))
    /// }
    /// ```
    ///
    /// The handler reads the resource once, as ``IncomingResource/chunks`` or with
    /// ``IncomingResource/write(to:)``. If it returns before reading everything, or throws, the
    /// transfer is cancelled and the sender told. Offers for names without a handler are
    /// refused.
    public func receiveResources(named name: String, using handler: @escaping @Sendable (IncomingResource) async throws -> Void) {
        resourceRegistry.register(name, handler)
    }

    /// Removes the handler for resources named `name`; later offers of such resources are refused.
    public func stopReceivingResources(named name: String) {
        resourceRegistry.remove(name)
    }
}
