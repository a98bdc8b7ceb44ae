import Logging
import NIOConcurrencyHelpers
import NIOCore

/// One run of a transceiver, from ``PeerTransceiver/start()`` to ``PeerTransceiver/stop()``:
/// the connection manager, the discovery backend and the dispatcher, wired together.
final class TransceiverSession: ConnectionManagerDelegate {
    let manager: ConnectionManager
    let dispatcher: MessageDispatcher
    private let discovery: (any PeerDiscovery)?
    private let hub: PeerEventHub
    private let pending: PendingRequests
    private let configuration: PeerConfiguration
    private let peerID: String
    private let state = NIOLockedValueBox(State())

    private struct State {
        var port: Int?
        var discoveryFailure: PeerKitError?
        var dispatcherTask: Task<Void, Never>?
    }

    init(configuration: PeerConfiguration, clock: PeerClock, security: WireSecurity, peerID: String, registry: MessageRegistry, pending: PendingRequests, hub: PeerEventHub) {
        self.configuration = configuration
        self.peerID = peerID
        self.hub = hub
        self.pending = pending
        let hello = Hello(
            peerID: peerID,
            name: configuration.peerName,
            serviceType: configuration.serviceType,
            discoveryInfo: configuration.discoveryInfo.isEmpty ? nil : configuration.discoveryInfo
        )
        manager = ConnectionManager(
            configuration: .init(
                localHello: hello,
                listenHost: configuration.listenHost,
                listenPort: configuration.listenPort,
                listens: configuration.advertises,
                maximumFrameLength: configuration.maximumFrameLength,
                maximumHandshakeFrameLength: configuration.maximumHandshakeFrameLength,
                maximumQueuedOutboundBytes: configuration.maximumQueuedOutboundBytes,
                slowPeerGracePeriod: configuration.slowPeerGracePeriod.timeAmount,
                maximumQueuedInboundBytes: configuration.maximumQueuedInboundBytes,
                maximumConnections: configuration.maximumConnections,
                maximumPendingHandshakes: configuration.maximumPendingHandshakes,
                heartbeatInterval: configuration.heartbeatInterval.timeAmount,
                peerTimeout: configuration.peerTimeout.timeAmount,
                handshakeTimeout: configuration.handshakeTimeout.timeAmount,
                connectTimeout: configuration.connectTimeout.timeAmount,
                backoff: configuration.reconnectBackoff,
                security: security,
                admission: AdmissionGate(admission: configuration.admission, timeout: configuration.handshakeTimeout.timeAmount, clock: clock),
                clock: clock,
                transport: configuration.transport
            ),
            group: configuration.eventLoopGroup,
            logger: configuration.logger
        )
        dispatcher = MessageDispatcher(registry: registry, pending: pending, logger: configuration.logger) { error in
            hub.publish(.error(error))
        }
        switch configuration.discovery {
        case .avahi: discovery = AvahiDiscovery(logger: configuration.logger)
        case let .staticPeers(endpoints): discovery = StaticDiscovery(endpoints: endpoints)
        case let .custom(make): discovery = make()
        case .none: discovery = nil
        }
    }

    /// The port listened on, once started.
    var port: Int? { state.withLockedValue { $0.port } }

    /// Set while discovery reports that it cannot work.
    var discoveryFailure: PeerKitError? { state.withLockedValue { $0.discoveryFailure } }

    /// Listens, then starts discovery. Returns the port (nil when not listening).
    func start() async throws -> Int? {
        manager.setDelegate(self)
        let dispatcher = dispatcher
        let task = Task { await dispatcher.run() }
        state.withLockedValue { $0.dispatcherTask = task }
        let port = try await manager.start()
        state.withLockedValue { $0.port = port }
        if let discovery {
            var txt = configuration.discoveryInfo
            txt["peerid"] = peerID
            txt["proto"] = String(Hello.currentProtocol)
            txt.merge(manager.configuration.security.txtRecord) { _, security in security }
            let request = DiscoveryRequest(
                serviceType: configuration.serviceType,
                peerID: peerID,
                peerName: configuration.peerName,
                port: configuration.advertises ? port : nil,
                txtRecord: txt
            )
            discovery.start(request) { [weak self] event in
                self?.discoveryEvent(event)
            }
        }
        return port
    }

    /// Stops discovery, says bye to every peer, and ends the dispatcher after what it has queued.
    /// Returns futures that complete when every connection and the listener are closed.
    @discardableResult
    func stop() -> [EventLoopFuture<Void>] {
        discovery?.stop()
        let closed = manager.stop()
        manager.setDelegate(nil)
        dispatcher.finish()
        return closed
    }

    private func discoveryEvent(_ event: DiscoveryEvent) {
        state.withLockedValue { state in
            switch event {
            case let .failed(error): state.discoveryFailure = error
            case .recovered, .found: state.discoveryFailure = nil
            case .lost, .advertised: break
            }
        }
        manager.handle(event)
    }

    // MARK: ConnectionManagerDelegate

    func emit(_ event: PeerEvent) {
        if case let .peerDisconnected(peer, reason) = event {
            // Requests waiting on the peer fail with the reason its connection ended.
            pending.failAll(peerID: peer.id, with: reason ?? PeerKitError.connectionClosed(peer: peer.name))
        }
        hub.publish(event)
    }

    func received(_ envelope: Envelope, from peer: Peer, on connection: PeerConnection) {
        dispatcher.enqueue(envelope, from: peer, on: connection)
    }
}
