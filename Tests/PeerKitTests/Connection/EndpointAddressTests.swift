import NIOCore
import Testing
@testable import PeerKit

@Suite("Endpoint addresses: zones, own addresses, listening families")
struct EndpointAddressTests {
    @Test("a link-local IPv6 endpoint keeps its zone as the socket address's scope")
    func zone() throws {
        let named = try #require(PeerEndpoint(host: "fe80::1%lo", port: 7000).socketAddress)
        guard case let .v6(address) = named else { Issue.record("not IPv6: \(named)"); return }
        #expect(address.address.sin6_scope_id == 1)
        #expect(named.port == 7000)
        let numbered = try #require(PeerEndpoint(host: "fe80::1%1", port: 7000).socketAddress)
        guard case let .v6(same) = numbered else { Issue.record("not IPv6: \(numbered)"); return }
        #expect(same.address.sin6_scope_id == 1)
        #expect(PeerEndpoint(host: "fe80::1%no-such-interface", port: 7000).socketAddress == nil)
        #expect(PeerEndpoint(host: "10.0.0.2", port: 7000).socketAddress?.ipAddress == "10.0.0.2")
        #expect(PeerEndpoint(host: "example.local", port: 7000).socketAddress == nil)
    }

    @Test("an endpoint is this transceiver's own when its address is local and its port is ours")
    func own() {
        let addresses: Set<String> = ["127.0.0.1", "172.17.0.1", "fe80::1", "::1"]
        #expect(LocalAddresses.isOwn(PeerEndpoint(host: "172.17.0.1", port: 7000), addresses: addresses, port: 7000))
        #expect(LocalAddresses.isOwn(PeerEndpoint(host: "fe80::1%docker0", port: 7000), addresses: addresses, port: 7000))
        #expect(LocalAddresses.isOwn(PeerEndpoint(host: "0:0::1", port: 7000), addresses: addresses, port: 7000))
        // Another process on this host (another port), another host, or no wildcard listener.
        #expect(!LocalAddresses.isOwn(PeerEndpoint(host: "172.17.0.1", port: 7001), addresses: addresses, port: 7000))
        #expect(!LocalAddresses.isOwn(PeerEndpoint(host: "10.0.0.2", port: 7000), addresses: addresses, port: 7000))
        #expect(!LocalAddresses.isOwn(PeerEndpoint(host: "172.17.0.1", port: 7000), addresses: addresses, port: nil))
        #expect(LocalAddresses.current().contains("127.0.0.1"))
    }

    @Test("a listener on :: takes both families, on another address its own family")
    func families() throws {
        #expect(ConnectionManager.families(of: try SocketAddress(ipAddress: "::", port: 1)) == .all)
        #expect(ConnectionManager.families(of: try SocketAddress(ipAddress: "::1", port: 1)) == .ipv6)
        #expect(ConnectionManager.families(of: try SocketAddress(ipAddress: "0.0.0.0", port: 1)) == .ipv4)
        #expect(ConnectionManager.families(of: try SocketAddress(ipAddress: "127.0.0.1", port: 1)) == .ipv4)
    }
}
