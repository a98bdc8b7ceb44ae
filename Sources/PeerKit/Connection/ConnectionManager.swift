import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Owns every connection of one transceiver: listens, dials what discovery finds, completes
/// handshakes, keeps exactly one connection per peer, and redials lost peers with back-off.
///
/// State lives behind one lock; events go to the ``ConnectionManagerDelegate`` while it is held,
/// so they are delivered in the order the state changed.
final class ConnectionManager: PeerConnectionDelegate, Sendable {
    /// Everything the manager needs to know, fixed at creation.
    struct Configuration: Sendable {
        var localHello: Hello
        var listenHost: String
        var listenPort: Int
        var listens: Bool
        var maximumFrameLength: Int
        var heartbeatInterval: TimeAmount
        var peerTimeout: TimeAmount
        var handshakeTimeout: TimeAmount
        var connectTimeout: TimeAmount
        var backoff: Backoff
        var security: WireSecurity
        var admission: AdmissionGate
    }

    private struct PeerRecord {
        var peer: Peer
        var active: PeerConnection?
        /// Discovery keys that lead to this peer; while there are any, a lost connection is redialled.
        var serviceKeys: Set<String> = []
        /// Set after the active connection closed as a tie-break loser: the winner is on its way.
        var pendingDisconnect: Scheduled<Void>?

        var isAvailable: Bool { active != nil || !serviceKeys.isEmpty || pendingDisconnect != nil }

        var snapshot: Peer {
            Peer(id: peer.id, name: peer.name, discoveryInfo: peer.discoveryInfo, isConnected: active != nil)
        }
    }

    private struct ServiceRecord {
        var service: DiscoveredService
        /// From the TXT record, or learned from the handshake of a connection dialled for it.
        var peerID: String?
        var attempt = 0
        var dialing = false
        var retry: Scheduled<Void>?
    }

    private struct State {
        var running = false
        /// The hello sent on new connections; its name follows the advertised instance name.
        var localHello: Hello
        var server: (any Channel)?
        var connections: [ObjectIdentifier: PeerConnection] = [:]
        var peers: [String: PeerRecord] = [:]
        var services: [String: ServiceRecord] = [:]
        /// How many duplicate connections were resolved by the tie-break (a diagnostic for tests).
        var tieBreaks = 0
    }

    let configuration: Configuration
    private let group: any EventLoopGroup
    private let timerLoop: any EventLoop
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    private let delegateBox = NIOLockedValueBox<(any ConnectionManagerDelegate)?>(nil)

    init(configuration: Configuration, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.state = NIOLockedValueBox(State(localHello: configuration.localHello))
        self.group = group
        self.timerLoop = group.next()
        self.logger = logger
    }

    /// Where events go. Set before ``start()``.
    func setDelegate(_ delegate: (any ConnectionManagerDelegate)?) {
        delegateBox.withLockedValue { $0 = delegate }
    }

    private var localPeerID: String { configuration.localHello.peerID }

    // MARK: Lifecycle

    /// Starts listening (when configured to); returns the port, or nil when not listening.
    func start() async throws -> Int? {
        state.withLockedValue { $0.running = true }
        guard configuration.listens else { return nil }
        let address = "\(configuration.listenHost):\(configuration.listenPort)"
        do {
            let server = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try self.configurePipeline(channel, direction: .inbound, serviceKey: nil)
                    }
                }
                .bind(host: configuration.listenHost, port: configuration.listenPort)
                .get()
            let stillRunning = state.withLockedValue { state -> Bool in
                if state.running { state.server = server }
                return state.running
            }
            if !stillRunning { try? await server.close() }
            return server.localAddress?.port
        } catch {
            state.withLockedValue { $0.running = false }
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
            throw PeerKitError.listenFailed(address: address, reason: reason)
        }
    }

    /// Says bye to every connected peer, closes every connection and the listener, and reports
    /// every peer disconnected and removed. Idempotent. Returns futures that complete when the
    /// connections and the listener are closed.
    @discardableResult
    func stop() -> [EventLoopFuture<Void>] {
        let (connections, server) = state.withLockedValue { state -> ([PeerConnection], (any Channel)?) in
            guard state.running else { return ([], nil) }
            state.running = false
            for service in state.services.values { service.retry?.cancel() }
            var removed = false
            for var record in state.peers.values {
                record.pendingDisconnect?.cancel()
                if record.active != nil {
                    record.active = nil
                    emit(.peerDisconnected(record.snapshot, reason: nil))
                }
                emit(.peerRemoved(record.snapshot))
                removed = true
            }
            if removed { emit(.availablePeersChanged([])) }
            state.peers = [:]
            state.services = [:]
            defer { state.connections = [:]; state.server = nil }
            return (Array(state.connections.values), state.server)
        }
        let bye = ConnectionStateMachine.ControlFrame.bye(reason: nil).encode()
        for connection in connections {
            connection.close(after: connection.remote != nil ? bye : nil)
        }
        server?.close(promise: nil)
        return connections.map(\.channel.closeFuture) + (server.map { [$0.closeFuture] } ?? [])
    }

    // MARK: Queries

    /// The active connection to a peer.
    func connection(to peerID: String) -> PeerConnection? {
        state.withLockedValue { $0.peers[peerID]?.active }
    }

    /// Every active connection.
    func activeConnections() -> [PeerConnection] {
        state.withLockedValue { $0.peers.values.compactMap(\.active) }
    }

    /// How many duplicate connections the tie-break has resolved.
    func tieBreakCount() -> Int {
        state.withLockedValue { $0.tieBreaks }
    }

    /// How many connections are open, including ones still in their handshake or being retired.
    func openConnectionCount() -> Int {
        state.withLockedValue { $0.connections.count }
    }

    /// Peers that are discovered or connected.
    func availablePeers() -> [Peer] {
        state.withLockedValue { Self.available($0) }
    }

    /// Peers that are connected.
    func connectedPeers() -> [Peer] {
        state.withLockedValue { $0.peers.values.filter { $0.active != nil }.map(\.snapshot).sorted(by: Self.byName) }
    }

    private static func available(_ state: State) -> [Peer] {
        state.peers.values.filter(\.isAvailable).map(\.snapshot).sorted(by: byName)
    }

    private static func byName(_ a: Peer, _ b: Peer) -> Bool {
        (a.name, a.id) < (b.name, b.id)
    }

    // MARK: Discovery

    /// Applies what discovery reports: dial new services, forget lost ones.
    func handle(_ event: DiscoveryEvent) {
        switch event {
        case let .found(service):
            serviceFound(service)
        case let .lost(key):
            serviceLost(key)
        case let .failed(error):
            logger.error("\(error)")
            state.withLockedValue { _ in emit(.error(error)) }
        case .recovered:
            logger.info("Discovery works again.")
        case let .advertised(name):
            // After a name collision the instance is renamed; peers should see the name they can find.
            logger.info("Advertised as \"\(name)\".")
            state.withLockedValue { $0.localHello.name = name }
        }
    }

    private func serviceFound(_ service: DiscoveredService) {
        guard service.peerID != localPeerID else { return }
        if let refusal = configuration.security.refusal(of: service) { return state.withLockedValue { _ in logger.notice("\(refusal)"); emit(.error(refusal)) } }
        let shouldDial = state.withLockedValue { state -> Bool in
            guard state.running else { return false }
            var record = state.services[service.key] ?? ServiceRecord(service: service)
            record.service = service
            if let peerID = service.peerID {
                if let previous = record.peerID, previous != peerID {
                    // The same instance name now belongs to another peer (a restarted process).
                    forget(serviceKey: service.key, of: previous, state: &state)
                }
                record.peerID = peerID
            }
            state.services[service.key] = record
            guard let peerID = record.peerID else { return !record.dialing }
            // A peer known from its TXT record is available before it is connected.
            let info = service.txtRecord.filter { $0.key != "peerid" && $0.key != "proto" }
            var peer = state.peers[peerID] ?? PeerRecord(peer: Peer(id: peerID, name: service.name, discoveryInfo: info, isConnected: false))
            let wasAvailable = state.peers[peerID]?.isAvailable ?? false
            peer.serviceKeys.insert(service.key)
            state.peers[peerID] = peer
            if !wasAvailable {
                emit(.peerAdded(peer.snapshot))
                emit(.availablePeersChanged(Self.available(state)))
            }
            return peer.active == nil && !record.dialing
        }
        if shouldDial { dial(key: service.key) }
    }

    private func serviceLost(_ key: String) {
        state.withLockedValue { state in
            guard let record = state.services.removeValue(forKey: key) else { return }
            record.retry?.cancel()
            if let peerID = record.peerID {
                forget(serviceKey: key, of: peerID, state: &state)
            }
        }
    }

    /// The service `key` no longer leads to `peerID`; the peer is removed when nothing else keeps it available.
    private func forget(serviceKey key: String, of peerID: String, state: inout State) {
        guard var peer = state.peers[peerID] else { return }
        peer.serviceKeys.remove(key)
        if peer.isAvailable {
            state.peers[peerID] = peer
        } else {
            state.peers[peerID] = nil
            emit(.peerRemoved(peer.snapshot))
            emit(.availablePeersChanged(Self.available(state)))
        }
    }

    // MARK: Dialling

    private func dial(key: String) {
        let endpoints = state.withLockedValue { state -> [PeerEndpoint] in
            guard state.running, var record = state.services[key], !record.dialing else { return [] }
            if let peerID = record.peerID, state.peers[peerID]?.active != nil { return [] }
            record.dialing = true
            record.retry?.cancel()
            record.retry = nil
            state.services[key] = record
            return record.service.endpoints
        }
        guard !endpoints.isEmpty else { return }
        connect(key: key, endpoints: endpoints[...])
    }

    private func connect(key: String, endpoints: ArraySlice<PeerEndpoint>) {
        guard let endpoint = endpoints.first else {
            dialFailed(key: key)
            return
        }
        ClientBootstrap(group: group)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try self.configurePipeline(channel, direction: .outbound, serviceKey: key)
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenFailure { error in
                self.logger.debug("Could not connect to \(endpoint): \(error)")
                self.connect(key: key, endpoints: endpoints.dropFirst())
            }
    }

    /// Every endpoint failed, or the connection closed before its handshake completed:
    /// try again after the back-off delay while the service is still discovered.
    private func dialFailed(key: String) {
        state.withLockedValue { state in
            guard state.running, var record = state.services[key] else { return }
            record.dialing = false
            let delay = configuration.backoff.delay(attempt: record.attempt, random: Double.random(in: 0..<1))
            record.attempt += 1
            record.retry = timerLoop.scheduleTask(in: delay.timeAmount) { self.dial(key: key) }
            state.services[key] = record
        }
    }

    /// Redial a peer's services soon after its connection was lost.
    private func scheduleRedial(_ keys: Set<String>, state: inout State) {
        for key in keys {
            guard var record = state.services[key], !record.dialing, record.retry == nil else { continue }
            record.attempt = 0
            let delay = configuration.backoff.delay(attempt: 0, random: Double.random(in: 0..<1))
            record.attempt = 1
            record.retry = timerLoop.scheduleTask(in: delay.timeAmount) { self.dial(key: key) }
            state.services[key] = record
        }
    }

    // MARK: Pipeline

    private func configurePipeline(_ channel: any Channel, direction: TieBreak.Direction, serviceKey: String?) throws {
        let stateMachine = ConnectionStateMachine.Configuration(
            localHello: state.withLockedValue { $0.localHello },
            heartbeatInterval: configuration.heartbeatInterval,
            peerTimeout: configuration.peerTimeout,
            handshakeTimeout: configuration.handshakeTimeout
        )
        let handler = PeerConnectionHandler(configuration: stateMachine, delegate: self) { channel in
            let connection = PeerConnection(channel: channel, direction: direction, serviceKey: serviceKey)
            let running = self.state.withLockedValue { state -> Bool in
                if state.running { state.connections[ObjectIdentifier(connection)] = connection }
                return state.running
            }
            if !running { channel.close(promise: nil) }
            return connection
        }
        try PeerPipeline.configure(channel, security: configuration.security, inbound: direction == .inbound, maximumFrameLength: configuration.maximumFrameLength, handler: handler)
    }

    // MARK: PeerConnectionDelegate

    func connectionEstablished(_ connection: PeerConnection, remote: Hello) {
        if let peer = connection.peer, configuration.admission.begin(connection, peer: peer, admitted: { self.admitted(connection, remote: remote) }, deliver: { self.connection(connection, received: $0) }, refused: { self.connection(connection, reported: $0) }) { return }
        admitted(connection, remote: remote)
    }

    private func admitted(_ connection: PeerConnection, remote: Hello) {
        let retired = state.withLockedValue { state -> PeerConnection? in
            guard state.running else {
                connection.close(after: nil)
                return nil
            }
            if let key = connection.serviceKey, var service = state.services[key] {
                service.dialing = false
                service.attempt = 0
                service.peerID = remote.peerID
                state.services[key] = service
            }
            let existing = state.peers[remote.peerID]
            let wasAvailable = existing?.isAvailable ?? false
            var record = existing ?? PeerRecord(peer: Peer(id: remote.peerID, name: remote.name, isConnected: true))
            var info = record.peer.discoveryInfo
            info.merge(remote.discoveryInfo ?? [:]) { _, hello in hello }
            record.peer = Peer(id: remote.peerID, name: remote.name, discoveryInfo: info, isConnected: true)
            if let key = connection.serviceKey, state.services[key] != nil { record.serviceKeys.insert(key) }

            if let active = record.active {
                let newWins = TieBreak.newConnectionWins(
                    existing: active.direction, new: connection.direction,
                    localPeerID: localPeerID, remotePeerID: remote.peerID
                )
                logger.debug("Two connections to \(record.peer); keeping the \(newWins ? "new" : "existing") one.")
                state.tieBreaks += 1
                if newWins { record.active = connection }
                state.peers[remote.peerID] = record
                return newWins ? active : connection
            }
            record.active = connection
            if let pending = record.pendingDisconnect {
                // The connection that won the tie-break arrived: nothing changed for the user.
                pending.cancel()
                record.pendingDisconnect = nil
                state.peers[remote.peerID] = record
                return nil
            }
            state.peers[remote.peerID] = record
            if !wasAvailable { emit(.peerAdded(record.snapshot)) }
            emit(.peerConnected(record.snapshot))
            emit(.availablePeersChanged(Self.available(state)))
            return nil
        }
        if let retired, retired.retire() {
            let bye = ConnectionStateMachine.ControlFrame.bye(reason: Bye.duplicateConnection).encode()
            retired.retire(bye: bye, timeout: configuration.handshakeTimeout)
        }
    }

    func connection(_ connection: PeerConnection, received envelope: Envelope) {
        guard let peer = connection.peer, !configuration.admission.hold(envelope, on: connection) else { return }
        delegate?.received(envelope, from: peer, on: connection)
    }

    func connection(_ connection: PeerConnection, reported error: PeerKitError) {
        logger.warning("\(error)")
        state.withLockedValue { _ in emit(.error(error)) }
    }

    func connectionClosed(_ connection: PeerConnection, error: PeerKitError?, byeReason: String?) {
        if let error, configuration.security.shouldLog(error, remote: connection.remoteDescription) { logger.notice("\(error)") }
        let redialKey = state.withLockedValue { state -> String? in
            state.connections[ObjectIdentifier(connection)] = nil
            guard state.running else { return nil }
            guard let remote = connection.remote else {
                // Closed before its handshake completed: a failed dial, or a stranger.
                if let error { emit(.error(error)) }
                // A peer refused for security reasons is not redialled until it is discovered again.
                return error?.isSecurityRefusal == true ? nil : connection.serviceKey
            }
            guard !connection.isRetired, var record = state.peers[remote.peerID], record.active === connection else {
                return nil
            }
            record.active = nil
            if byeReason == Bye.duplicateConnection {
                // The peer kept another connection to us; it is being established.
                record.pendingDisconnect = timerLoop.scheduleTask(in: configuration.handshakeTimeout) {
                    self.duplicateGraceExpired(peerID: remote.peerID)
                }
                state.peers[remote.peerID] = record
                return nil
            }
            emit(.peerDisconnected(record.snapshot, reason: error))
            if record.serviceKeys.isEmpty {
                state.peers[remote.peerID] = nil
                emit(.peerRemoved(record.snapshot))
            } else {
                state.peers[remote.peerID] = record
                if error?.isSecurityRefusal != true { scheduleRedial(record.serviceKeys, state: &state) }
            }
            emit(.availablePeersChanged(Self.available(state)))
            return nil
        }
        if let redialKey { dialFailed(key: redialKey) }
    }

    private func duplicateGraceExpired(peerID: String) {
        state.withLockedValue { state in
            guard state.running, var record = state.peers[peerID], record.pendingDisconnect != nil, record.active == nil else { return }
            record.pendingDisconnect = nil
            emit(.peerDisconnected(record.snapshot, reason: .connectionClosed(peer: record.peer.name)))
            if record.serviceKeys.isEmpty {
                state.peers[peerID] = nil
                emit(.peerRemoved(record.snapshot))
            } else {
                state.peers[peerID] = record
                scheduleRedial(record.serviceKeys, state: &state)
            }
            emit(.availablePeersChanged(Self.available(state)))
        }
    }

    // MARK: Events

    private var delegate: (any ConnectionManagerDelegate)? { delegateBox.withLockedValue { $0 } }

    /// Call with the state lock held.
    private func emit(_ event: PeerEvent) {
        delegate?.emit(event)
    }
}
