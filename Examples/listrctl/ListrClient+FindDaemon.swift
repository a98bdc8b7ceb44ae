import PeerKit

extension ListrClient {
    /// How long to wait, after the first daemon is connected, before looking for others.
    ///
    /// avahi-daemon answers a browse from its cache, so every daemon it knows is reported within
    /// milliseconds of the first, and PeerKit dials each at once.
    static let otherDaemonsDiscoveryDelay: Duration = .milliseconds(50)

    /// The longest wait for the daemons found to connect (or go away), so that several are told
    /// apart even on a slow machine. Only a daemon that is advertised but does not answer (mDNS
    /// keeps a withdrawn record for about a second) makes it last that long.
    static let otherDaemonsSettleLimit: Duration = .seconds(1)

    /// The daemon to use: the one named by `--peer`, or the only one there is.
    ///
    /// Only daemons that connect count: an advertisement that outlives its daemon is not a
    /// candidate, so a restarted daemon is not mistaken for two.
    static func findDaemon(on transceiver: PeerTransceiver, options: ClientOptions) async throws -> Peer {
        let timeout = options.timeoutDuration
        if let name = options.peer {
            do {
                return try await transceiver.waitForPeer(timeout: timeout) { $0.name == name }
            } catch PeerKitError.noPeerFound {
                let available = Set(transceiver.availablePeers.map(\.name)).sorted()
                throw ListrCtlError.noDaemonNamed(name, serviceType: options.serviceType, timeout: timeout, available: available)
            }
        }
        let first: Peer
        do {
            first = try await transceiver.waitForPeer(timeout: timeout)
        } catch PeerKitError.noPeerFound {
            throw ListrCtlError.noDaemon(serviceType: options.serviceType, timeout: timeout, addresses: options.endpoints)
        }
        if options.endpoints.count == 1 {
            return first  // one address given: there is nothing else to notice
        }
        try await Task.sleep(for: otherDaemonsDiscoveryDelay)
        await waitUntilSettled(transceiver, limit: otherDaemonsSettleLimit)
        let daemons = Set(transceiver.connectedPeers + [first])
        guard daemons.count == 1 else {
            throw ListrCtlError.severalDaemons(serviceType: options.serviceType, names: daemons.map(\.name).sorted())
        }
        return first
    }

    /// Waits until every available peer is connected, or `limit` passes.
    private static func waitUntilSettled(_ transceiver: PeerTransceiver, limit: Duration) async {
        let events = transceiver.events()
        @Sendable func settled() -> Bool {
            let connected = Set(transceiver.connectedPeers)
            return transceiver.availablePeers.allSatisfy(connected.contains)
        }
        if settled() { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in events where settled() { return }
            }
            group.addTask {
                try? await Task.sleep(for: limit)  // cancelled once settled
            }
            await group.next()
            group.cancelAll()
        }
    }
}
