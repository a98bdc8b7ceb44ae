import Testing
@testable import PeerKit

extension DiscoveryTests {
    @Suite("Aggregating instances across interfaces")
    struct DiscoveredInstancesTests {
        typealias Location = DiscoveredInstances.Location
        typealias Resolution = DiscoveredInstances.Resolution

        private let loopbackV4 = Location(interface: 1, isIPv6: false)
        private let loopbackV6 = Location(interface: 1, isIPv6: true)
        private let ethernetV4 = Location(interface: 2, isIPv6: false)

        private func resolution(_ address: String, port: Int = 7000, peerID: String = "other", extra: [String: String] = [:]) -> Resolution {
            Resolution(address: address, isIPv4: !address.contains(":"), port: port,
                       txtRecord: extra.merging(["peerid": peerID, "proto": "1"]) { $1 })
        }

        @Test func anInstanceIsFoundOnceResolvedWithItsTXT() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            instances.appeared("Kitchen", at: loopbackV4)
            let event = instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1", extra: ["role": "store"]))
            #expect(event == .found(DiscoveredService(
                key: "Kitchen", name: "Kitchen", peerID: "other",
                endpoints: [PeerEndpoint(host: "127.0.0.1", port: 7000)],
                txtRecord: ["peerid": "other", "proto": "1", "role": "store"])))
        }

        @Test func addressesFromEveryInterfaceAreAggregatedIPv4First() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            _ = instances.resolved("Kitchen", at: loopbackV6, resolution("fe80::1%lo"))
            _ = instances.resolved("Kitchen", at: ethernetV4, resolution("192.168.1.20"))
            let event = instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1"))
            guard case let .found(service) = event else {
                Issue.record("expected found, got \(String(describing: event))")
                return
            }
            #expect(service.endpoints.map(\.host) == ["127.0.0.1", "192.168.1.20", "fe80::1%lo"])
        }

        @Test("an instance still being resolved on another interface or IP version is reported as resolving, then settled")
        func stillResolvingIsReported() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            instances.appeared("Kitchen", at: loopbackV4)
            instances.appeared("Kitchen", at: loopbackV6)
            guard case let .found(first)? = instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1")) else {
                Issue.record("expected found"); return
            }
            #expect(first.isResolving)
            guard case let .found(second)? = instances.resolved("Kitchen", at: loopbackV6, resolution("fe80::1%lo")) else {
                Issue.record("expected found"); return
            }
            #expect(!second.isResolving)
            #expect(second.endpoints.map(\.host) == ["127.0.0.1", "fe80::1%lo"])
            // A resolution that fails settles it too, with the endpoints it has.
            instances.appeared("Pantry", at: loopbackV4)
            instances.appeared("Pantry", at: loopbackV6)
            _ = instances.resolved("Pantry", at: loopbackV4, resolution("127.0.0.1"))
            guard case let .found(settled)? = instances.resolutionFailed("Pantry", at: loopbackV6) else {
                Issue.record("expected found"); return
            }
            #expect(!settled.isResolving)
        }

        @Test func anUnchangedResolutionIsNotReportedAgain() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            #expect(instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1")) != nil)
            #expect(instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1")) == nil)
            // A new TXT value is a change.
            #expect(instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1", extra: ["v": "2"])) != nil)
        }

        @Test func itsOwnServiceIsNeverReported() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            instances.appeared("Myself", at: loopbackV4)
            #expect(instances.resolved("Myself", at: loopbackV4, resolution("127.0.0.1", peerID: "me")) == nil)
            #expect(instances.disappeared("Myself", at: loopbackV4) == nil)
            #expect(instances.services.isEmpty)
        }

        @Test func anInstanceIsLostOnlyWhenGoneFromEveryInterface() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            _ = instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1"))
            _ = instances.resolved("Kitchen", at: ethernetV4, resolution("192.168.1.20"))
            let shrunk = instances.disappeared("Kitchen", at: ethernetV4)
            #expect(shrunk == .found(DiscoveredService(key: "Kitchen", name: "Kitchen", peerID: "other",
                                                       endpoints: [PeerEndpoint(host: "127.0.0.1", port: 7000)],
                                                       txtRecord: ["peerid": "other", "proto": "1"])))
            #expect(instances.disappeared("Kitchen", at: loopbackV4) == .lost(key: "Kitchen"))
            #expect(instances.services.isEmpty)
        }

        @Test func anInstanceThatNeverResolvedIsNeitherFoundNorLost() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            instances.appeared("Ghost", at: loopbackV4)
            #expect(instances.resolutionFailed("Ghost", at: loopbackV4) == nil)
            #expect(instances.disappeared("Ghost", at: loopbackV4) == nil)
        }

        @Test func afterALostConnectionOnlyInstancesNotListedAgainAreLost() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            _ = instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1", port: 7000))
            _ = instances.resolved("Hall", at: loopbackV4, resolution("127.0.0.1", port: 7001))
            instances.connectionLost()
            // The new browser lists Kitchen again, unchanged: nothing to report.
            instances.appeared("Kitchen", at: loopbackV4)
            #expect(instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1", port: 7000)) == nil)
            #expect(instances.browserListedAll() == [.lost(key: "Hall")])
            #expect(instances.services.map(\.name) == ["Kitchen"])
            // Only the first complete listing after a lost connection sweeps.
            #expect(instances.browserListedAll() == [])
        }
    
        @Test("known services are listed once the cache is read and every instance seen has answered")
        func knownServicesAreListedAfterTheCacheAndItsResolutions() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            instances.appeared("Kitchen", at: loopbackV4)
            instances.appeared("Garage", at: loopbackV4)
            #expect(instances.cacheExhausted() == nil)
            _ = instances.resolved("Kitchen", at: loopbackV4, resolution("127.0.0.1"))
            #expect(instances.knownServicesListedIfSettled() == nil)
            _ = instances.resolutionFailed("Garage", at: loopbackV4)
            #expect(instances.knownServicesListedIfSettled() == .knownServicesListed)
            #expect(instances.knownServicesListedIfSettled() == nil)
            instances.appeared("Attic", at: loopbackV4)
            #expect(instances.cacheExhausted() == nil)
        }

        @Test("an empty cache lists known services at once; nothing is listed before the cache is read")
        func anEmptyCacheListsAtOnce() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            #expect(instances.knownServicesListedIfSettled() == nil)
            #expect(instances.cacheExhausted() == .knownServicesListed)
        }

        @Test("an instance that disappears before it is resolved does not hold the listing back")
        func aVanishedInstanceDoesNotHoldTheListingBack() {
            var instances = DiscoveredInstances(ownPeerID: "me")
            instances.appeared("Kitchen", at: loopbackV4)
            #expect(instances.cacheExhausted() == nil)
            _ = instances.disappeared("Kitchen", at: loopbackV4)
            #expect(instances.knownServicesListedIfSettled() == .knownServicesListed)
        }
    }
}
