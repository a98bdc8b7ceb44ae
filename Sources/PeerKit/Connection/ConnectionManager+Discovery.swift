import NIOCore

// What discovery reports: services found, changed and lost.
extension ConnectionManager {
    /// Applies what discovery reports: dial new services, forget lost ones.
    func handle(_ event: DiscoveryEvent) {
        switch event {
        case let .found(service):
            serviceFound(service)
        case let .lost(key):
            serviceLost(key)
        case let .failed(error):
            logger.error("\(error)")
            withState { $0.emit(.error(error)) }
        case .recovered:
            logger.info("Discovery works again.")
        case .knownServicesListed:
            withState { $0.emit(.knownPeersListed) }
        case let .advertised(name):
            advertised(as: name)
        }
    }

    /// After a name collision the instance is renamed: new connections say the new name, and
    /// peers already connected are told, so that every peer shows the name it can find.
    private func advertised(as name: String) {
        logger.info("Advertised as \"\(LogSafe.text(name))\".")
        let open = withState { state -> [PeerConnection] in
            guard state.localHello.name != name else { return [] }
            state.localHello.name = name
            return Array(state.connections.values)
        }
        let frame = ConnectionStateMachine.ControlFrame.rename(name: name).encode()
        for connection in open where connection.remote != nil {
            connection.send(frame)
        }
    }

    private func serviceFound(_ service: DiscoveredService) {
        guard service.peerID != localPeerID else { return }
        if let refusal = configuration.security.refusal(of: service) {
            // It advertises another security mode or key: dialling it would only fail.
            if configuration.security.shouldLog(refusal, remote: service.key) { logger.notice("\(refusal)") }
            withState { $0.emit(.error(refusal)) }
            return
        }
        let own = ownEndpointFilter()
        var joined: (actions: [DialPlan.Action], generation: Int) = ([], 0)
        var newEndpoints = false
        let shouldDial = withState { state -> Bool in
            guard state.running else { return false }
            var record = state.services[service.key] ?? ServiceRecord(service: service)
            newEndpoints = state.services[service.key].map { Set($0.service.endpoints) != Set(service.endpoints) } ?? true
            record.service = service
            if var plan = record.plan {
                // A dial is under way: the addresses resolved since join it (Happy Eyeballs).
                joined = (plan.add(service.endpoints.filter { !own($0) }, stillResolving: service.isResolving), record.planGeneration)
                record.plan = plan
            }
            // Advertised anew while we were backing off: try again now, from the start.
            if let retry = record.dialer.advertised() { state.timersToCancel.append(retry) }
            if let peerID = service.peerID {
                if let previous = record.peerID, previous != peerID {
                    // The same instance name now belongs to another peer (a restarted process).
                    forget(serviceKey: service.key, of: previous, state: &state)
                }
                record.peerID = peerID
            }
            state.services[service.key] = record
            guard let peerID = record.peerID else { return !record.dialer.isDialling }
            // A peer known from its TXT record is available before it is connected.
            let info = service.txtRecord.filter { $0.key != "peerid" && $0.key != "proto" }
            let existing = state.peers[peerID]
            var peer = existing ?? PeerRecord(peer: Peer(id: peerID, name: service.name, discoveryInfo: info, isConnected: false))
            let wasAvailable = existing?.isAvailable ?? false
            peer.serviceKeys.insert(service.key)
            if existing != nil, Self.mergeDiscoveryInfo(info, into: &peer.peer), wasAvailable {
                // A peer met first through its own connection, or whose TXT record changed.
                state.peers[peerID] = peer
                state.emit(.availablePeersChanged(Self.available(state)))
            }
            if existing != nil, peer.active == nil, peer.peer.name != service.name {
                // Renamed (a collision) while not connected: show the name it can be found by.
                peer.peer = Peer(id: peerID, name: service.name, discoveryInfo: peer.peer.discoveryInfo, isConnected: false, fingerprint: peer.peer.fingerprint)
                if wasAvailable { state.peers[peerID] = peer; state.emit(.availablePeersChanged(Self.available(state))) }
            }
            state.peers[peerID] = peer
            if !wasAvailable {
                state.emit(.peerAdded(peer.snapshot))
                state.emit(.availablePeersChanged(Self.available(state)))
            }
            return peer.active == nil && !record.dialer.isDialling
        }
        if newEndpoints {
            // Where a peer can be dialled, for `--verbose` diagnostics on a LAN: avahi resolves
            // each address family on its own, so the addresses come one after the other.
            let addresses = service.endpoints.isEmpty ? "no address yet" : service.endpoints.map(\.description).joined(separator: ", ")
            logger.debug("\"\(LogSafe.text(service.name, maximumBytes: 80))\" is advertised at \(LogSafe.text(addresses, maximumBytes: 1024)).")
        }
        perform(joined.actions, key: service.key, generation: joined.generation)
        if shouldDial { dial(key: service.key) }
    }

    /// Merges a service's TXT pairs (without `peerid` and `proto`) into what is known of its peer,
    /// whichever way the peer was met first; returns whether anything changed. The TXT record
    /// is what the peer advertises now, so its values win.
    private static func mergeDiscoveryInfo(_ info: [String: String], into peer: inout Peer) -> Bool {
        let merged = peer.discoveryInfo.merging(info) { _, txt in txt }
        guard merged != peer.discoveryInfo else { return false }
        peer = Peer(id: peer.id, name: peer.name, discoveryInfo: merged, isConnected: peer.isConnected, fingerprint: peer.fingerprint)
        return true
    }

    private func serviceLost(_ key: String) {
        let attempts = withState { state -> [any Channel] in
            guard var record = state.services.removeValue(forKey: key) else { return [] }
            record.cancelRetry(&state)
            if let peerID = record.peerID {
                forget(serviceKey: key, of: peerID, state: &state)
            }
            return Array(record.attempts.values)
        }
        // A dial under way ends with the service: its attempts are closed (not yet connected).
        for channel in attempts { channel.close(promise: nil) }
    }

    /// The service `key` no longer leads to `peerID`; the peer is removed when nothing else keeps it available.
    private func forget(serviceKey key: String, of peerID: String, state: inout State) {
        guard var peer = state.peers[peerID] else { return }
        peer.serviceKeys.remove(key)
        if peer.isAvailable {
            state.peers[peerID] = peer
        } else {
            state.peers[peerID] = nil
            state.emit(.peerRemoved(peer.snapshot))
            state.emit(.availablePeersChanged(Self.available(state)))
        }
    }
}
