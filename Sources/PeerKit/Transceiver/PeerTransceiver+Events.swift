extension PeerTransceiver {
    /// Called when a peer becomes available (discovered, or connected without being discovered).
    ///
    /// The closures are called one at a time, in order, from a task of their own.
    public var peerAdded: @Sendable (Peer) -> Void {
        get { hub.callbacks.withLockedValue { $0.peerAdded } }
        set { hub.callbacks.withLockedValue { $0.peerAdded = newValue } }
    }

    /// Called when a peer is no longer available.
    public var peerRemoved: @Sendable (Peer) -> Void {
        get { hub.callbacks.withLockedValue { $0.peerRemoved } }
        set { hub.callbacks.withLockedValue { $0.peerRemoved = newValue } }
    }

    /// Called when a connection to a peer completes its handshake.
    public var peerConnected: @Sendable (Peer) -> Void {
        get { hub.callbacks.withLockedValue { $0.peerConnected } }
        set { hub.callbacks.withLockedValue { $0.peerConnected = newValue } }
    }

    /// Called when the connection to a peer ends.
    public var peerDisconnected: @Sendable (Peer) -> Void {
        get { hub.callbacks.withLockedValue { $0.peerDisconnected } }
        set { hub.callbacks.withLockedValue { $0.peerDisconnected = newValue } }
    }

    /// Called with the new list whenever the available peers change.
    public var availablePeersDidChange: @Sendable ([Peer]) -> Void {
        get { hub.callbacks.withLockedValue { $0.availablePeersDidChange } }
        set { hub.callbacks.withLockedValue { $0.availablePeersDidChange = newValue } }
    }

    /// A new stream of everything that happens to the transceiver from now on.
    ///
    /// Each call makes a new subscription; events are delivered to every subscription in the
    /// order they happened. Events published before the call are not replayed: subscribe before
    /// ``start()`` to see ``PeerEvent/started(port:)``. The stream finishes after delivering
    /// ``PeerEvent/stopped`` when the transceiver stops (``stop()`` or ``shutdown()``), or when
    /// the transceiver is deallocated; after a restart, call `events()` again.
    ///
    /// ```swift
    /// for await event in transceiver.events() {
    ///     if case .peerConnected(let peer) = event { print("connected to \(peer.name)") }
    /// }
    /// ```
    public func events() -> AsyncStream<PeerEvent> {
        hub.subscribe()
    }

    /// Waits until a peer matching `predicate` is connected and returns it.
    ///
    /// Returns at once when such a peer is already connected. A command-line tool uses it to
    /// wait for its daemon:
    /// ```swift
    /// let daemon = try await transceiver.waitForPeer(timeout: .seconds(5)) { $0.name == "Kitchen" }
    /// ```
    /// - Throws: ``PeerKitError/noPeerFound(serviceType:timeout:)`` after `timeout`; the discovery
    ///   error (``PeerKitError/discoveryUnavailable(serviceType:reason:)``) at once when discovery
    ///   cannot work; ``PeerKitError/notRunning`` when the transceiver stops meanwhile.
    public func waitForPeer(timeout: Duration, where predicate: @escaping @Sendable (Peer) -> Bool = { _ in true }) async throws -> Peer {
        let events = hub.subscribe()
        if let peer = connectedPeers.first(where: predicate) { return peer }
        if let failure = session?.discoveryFailure { throw failure }
        let serviceType = configuration.serviceType
        // The deadline is fixed now, not when the child task below starts.
        let sleep = clock.sleep(untilOffset: clock.offset + timeout)
        return try await withThrowingTaskGroup(of: Peer.self) { group in
            group.addTask {
                for await event in events {
                    switch event {
                    case let .peerConnected(peer) where predicate(peer):
                        return peer
                    case let .error(error):
                        if error.code == .discoveryUnavailable { throw error }
                    case .stopped:
                        throw PeerKitError.notRunning
                    default:
                        continue
                    }
                }
                throw PeerKitError.notRunning
            }
            group.addTask {
                try await sleep.wait()
                throw PeerKitError.noPeerFound(serviceType: serviceType, timeout: timeout)
            }
            defer { group.cancelAll() }
            guard let peer = try await group.next() else {
                throw PeerKitError.noPeerFound(serviceType: serviceType, timeout: timeout)
            }
            return peer
        }
    }
}
