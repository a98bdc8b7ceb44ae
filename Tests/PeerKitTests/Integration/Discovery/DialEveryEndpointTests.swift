import Clocks
import Foundation
import Logging
import Testing
@testable import PeerKit

/// Issue 31 over loopback TCP: dual-stack listening, every endpoint of a service dialled in the
/// manner of Happy Eyeballs, TXT records merged into peers met first through their connection,
/// and endpoints that lead back to the transceiver itself. (The same on a LAN of network
/// namespaces with IPv6 on: `make test-lan`, scenarios 8 to 12.)
@Suite("Dialling every endpoint of a service, listening on both families")
struct DialEveryEndpointTests {
    /// A loopback port with nothing listening: dialling it is refused at once.
    private static let refusingPort = 1

    private func start(_ configuration: PeerConfiguration) async throws -> PeerTransceiver {
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        return transceiver
    }

    @Test("the default listen host accepts IPv6 and IPv4 peers, and the service is advertised on both families")
    func dualStackByDefault() async throws {
        let serviceType = randomServiceType()
        let discovery = ManualDiscovery()
        var configuration = manualConfiguration(serviceType: serviceType, name: "server", discovery: discovery)
        configuration.listenHost = PeerConfiguration(serviceType: serviceType).listenHost
        let server = try await start(configuration)
        defer { server.stop() }
        let port = try #require(server.listeningPort)
        #expect(discovery.startRequests.first?.addressFamilies == .all)
        for host in ["::1", "127.0.0.1"] {
            let client = try await start(loopbackConfiguration(serviceType: serviceType, name: "client \(host)",
                                                               peers: [PeerEndpoint(host: host, port: port)]))
            defer { client.stop() }
            let peer = try await client.waitForPeer(timeout: .seconds(20))
            #expect(peer.id == server.peerID)
        }
    }

    @Test("a listener on an IPv4 address is advertised on IPv4 alone")
    func ipv4ListenerAdvertisedOnIPv4() async throws {
        let discovery = ManualDiscovery()
        let server = try await start(manualConfiguration(serviceType: randomServiceType(), name: "v4", discovery: discovery))
        defer { server.stop() }
        #expect(discovery.startRequests.first?.addressFamilies == .ipv4)
    }

    @Test("an address resolved just after the first joins the dial: no notice says the service cannot be reached")
    func lateAddressJoins() async throws {
        let serviceType = randomServiceType()
        // The server's log too, for the failure's message: in 1 of 14 runs of the whole suite
        // (2026-12-06) the client logged the server unreachable, its connection "closed
        // unexpectedly" just after it connected. 60 runs alone did not show it again.
        let serverLog = CapturedLog()
        var serverConfiguration = loopbackConfiguration(serviceType: serviceType, name: "server")
        serverConfiguration.logger = serverLog.logger
        // The client's heartbeat stands still on its test clock (below), so the link lives on the
        // server's pings alone, which the accepting side sends only once the dialler's ping is
        // overdue: about half the peer timeout before it runs out. At the parallel run's busiest
        // the pong missed the rest of the default 2.5 s (2026-12-08: the server logged "client
        // did not answer for 2.5 s", and the client the connection closed). This test is about
        // the dial, not the heartbeat.
        serverConfiguration.peerTimeout = .seconds(60)
        let server = try await start(serverConfiguration)
        defer { server.stop() }
        let log = CapturedLog()
        let discovery = ManualDiscovery()
        var configuration = manualConfiguration(serviceType: serviceType, name: "client", discovery: discovery)
        configuration.logger = log.logger
        // The client's timers (the 250 ms attempt delay among them) stand still on a test clock:
        // however slow a loaded machine is between the two resolutions, the second comes within
        // the delay, as it does on a LAN.
        let clock = TestClock()
        configuration.clock = clock
        let client = try await start(configuration)
        defer { client.stop() }
        let events = client.events()
        let refusing = PeerEndpoint(host: "127.0.0.1", port: Self.refusingPort)
        func service(_ endpoints: [PeerEndpoint], isResolving: Bool) -> DiscoveryEvent {
            .found(DiscoveredService(key: "server", name: "server", peerID: server.peerID, endpoints: endpoints,
                                     txtRecord: ["peerid": server.peerID, "proto": "1", "sec": "none"],
                                     isResolving: isResolving))
        }
        // Avahi resolves one family first (an address that refuses), then the other, tens of
        // milliseconds later: the refusal (well under a millisecond on loopback) comes first,
        // and the dial waits out the 250 ms attempt delay for the address still being resolved.
        discovery.inject(service([refusing], isResolving: true))
        // The refusal has come back before the second address is resolved.
        try await Task.sleep(for: .milliseconds(60))
        discovery.inject(service([refusing, try endpoint(of: server)], isResolving: false))
        // The joined address is tried when the attempt delay has passed.
        await clock.advance(by: .milliseconds(250))
        _ = try await nextEvent(events, "the server connected") {
            if case let .peerConnected(peer) = $0 { return peer.id == server.peerID }
            return false
        }
        #expect(log.messages(containing: "Cannot reach").isEmpty)
        let notices = log.messages(atLeast: .notice).filter { !$0.contains("neither authenticated") }
        #expect(notices.isEmpty, "the client logged \(notices). Its whole log:\n\(log.messages().joined(separator: "\n"))\nThe server's:\n\(serverLog.messages().joined(separator: "\n"))")
    }

    @Test("a peer met first through its own connection gets the pairs of its TXT record once discovered")
    func txtMergedIntoInboundPeer() async throws {
        let serviceType = randomServiceType()
        let discovery = ManualDiscovery()
        let server = try await start(manualConfiguration(serviceType: serviceType, name: "server", discovery: discovery))
        defer { server.stop() }
        let events = server.events()
        let client = try await start(loopbackConfiguration(serviceType: serviceType, name: "client",
                                                           peers: [try endpoint(of: server)]))
        defer { client.stop() }
        _ = try await nextEvent(events, "the client connected") {
            if case let .peerConnected(peer) = $0 { return peer.id == client.peerID }
            return false
        }
        discovery.inject(.found(DiscoveredService(
            key: "client", name: "client", peerID: client.peerID, endpoints: [try endpoint(of: client)],
            txtRecord: ["peerid": client.peerID, "proto": "1", "sec": "none", "role": "kitchen"])))
        let event = try await nextEvent(events, "the client's TXT pairs") {
            if case let .availablePeersChanged(peers) = $0 { return peers.contains { $0.discoveryInfo["role"] == "kitchen" } }
            return false
        }
        guard case let .availablePeersChanged(peers) = event else { return }
        let peer = try #require(peers.first { $0.id == client.peerID })
        #expect(peer.discoveryInfo == ["sec": "none", "role": "kitchen"])
        #expect(peer.isConnected)
        #expect(server.availablePeers.count == 1)
    }

    @Test("an endpoint that leads back to this transceiver itself is not dialled, and nothing is logged about it")
    func ownEndpointDropped() async throws {
        let serviceType = randomServiceType()
        let log = CapturedLog()
        let discovery = ManualDiscovery()
        var configuration = manualConfiguration(serviceType: serviceType, name: "self", discovery: discovery)
        configuration.listenHost = "0.0.0.0"
        configuration.logger = log.logger
        let transceiver = try await start(configuration)
        defer { transceiver.stop() }
        let port = try #require(transceiver.listeningPort)
        // Another peer's service whose only address is one this host has too (docker0-like).
        discovery.inject(.found(DiscoveredService(
            key: "ghost", name: "ghost", peerID: "ghost-id", endpoints: [PeerEndpoint(host: "127.0.0.1", port: port)],
            txtRecord: ["peerid": "ghost-id", "proto": "1"])))
        #expect(await log.waitForMessage(containing: "leads back to this transceiver itself"))
        // A dial would have met this transceiver's own hello within milliseconds; give it a moment.
        try await Task.sleep(for: .milliseconds(300))
        #expect(log.messages(atLeast: .notice).filter { !$0.contains("neither authenticated") }.isEmpty)
        #expect(log.messages(containing: "leads back to this peer").isEmpty)
        #expect(transceiver.session?.manager.openConnectionCount() == 0)
    }
}
