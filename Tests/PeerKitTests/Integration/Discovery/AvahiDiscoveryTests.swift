import Foundation
import PeerKit
import Testing

extension DiscoveryTests {
    /// AvahiDiscovery against the real avahi-daemon that scripts/avahi-up starts (loopback only).
    /// Each test uses its own random service type, so tests running at once do not see each other.
    @Suite("Avahi against the real daemon")
    struct AvahiDiscoveryTests {
        @Test func itsAdvertisementIsSeenByAvahiBrowseWithPortAndTXT() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let request = AvahiTestSupport.request(serviceType: type, name: "Advertiser", port: 40123, info: ["role": "store"])
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            discovery.start(request, onEvent: events.onEvent)
            defer { discovery.stop() }

            #expect(try await events.advertisedName() == "Advertiser")
            // avahi-browse -p: =;interface;protocol;name;type;domain;host;address;port;"txt" "txt"
            let lines = try await AvahiTestSupport.browseResolved(serviceType: type) { !$0.isEmpty }
            let line = try #require(lines.first { $0.count >= 10 && $0[3] == "Advertiser" }, "avahi-browse did not resolve the service: \(lines)")
            #expect(line[4] == "_\(type)._tcp")
            #expect(line[5] == "local")
            #expect(line[8] == "40123")
            let txt = Set(line[9].split(separator: " ").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) })
            #expect(txt == ["peerid=\(request.peerID)", "proto=1", "role=store"])
        }

        @Test func aForeignServiceIsFoundWithItsTXTAndLostWhenItEnds() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            discovery.start(AvahiTestSupport.request(serviceType: type, name: "Browser", port: nil), onEvent: events.onEvent)
            defer { discovery.stop() }

            let publisher = try ChildProcess("avahi-publish", ["-s", "Foreign Peer", "_\(type)._tcp", "40999", "k=v", "flag"])
            let service = try await events.found(named: "Foreign Peer")
            #expect(service.key == "Foreign Peer")
            #expect(service.endpoints.first == PeerEndpoint(host: "127.0.0.1", port: 40999))
            #expect(service.txtRecord == ["k": "v", "flag": ""])
            #expect(service.peerID == nil)

            publisher.terminate()
            try await events.first("lost Foreign Peer") { $0 == .lost(key: "Foreign Peer") }
        }

        @Test func twoInstancesFindEachOtherAndIgnoreThemselves() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let requestA = AvahiTestSupport.request(serviceType: type, name: "Alpha", port: 40001)
            let requestB = AvahiTestSupport.request(serviceType: type, name: "Bravo", port: 40002)
            let (a, b) = (AvahiDiscovery(), AvahiDiscovery())
            let (eventsA, eventsB) = (DiscoveryEventRecorder(), DiscoveryEventRecorder())
            a.start(requestA, onEvent: eventsA.onEvent)
            b.start(requestB, onEvent: eventsB.onEvent)
            defer { a.stop(); b.stop() }

            let bravo = try await eventsA.found(named: "Bravo")
            let alpha = try await eventsB.found(named: "Alpha")
            #expect(bravo.peerID == requestB.peerID)
            #expect(bravo.endpoints.contains(PeerEndpoint(host: "127.0.0.1", port: 40002)))
            #expect(alpha.peerID == requestA.peerID)
            #expect(alpha.endpoints.contains(PeerEndpoint(host: "127.0.0.1", port: 40001)))
            #expect(bravo.txtRecord == requestB.txtRecord)

            // Each has advertised and seen the other; neither ever reports itself.
            _ = try await eventsA.advertisedName()
            _ = try await eventsB.advertisedName()
            #expect(!eventsA.events.contains { if case let .found(s) = $0 { s.peerID == requestA.peerID } else { false } })
            #expect(!eventsB.events.contains { if case let .found(s) = $0 { s.peerID == requestB.peerID } else { false } })

            // Stopping one is seen by the other.
            b.stop()
            try await eventsA.first("lost Bravo") { $0 == .lost(key: "Bravo") }
        }

        @Test func aNameCollisionRenamesTheSecondAndBothAreFound() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let (first, second, observer) = (AvahiDiscovery(), AvahiDiscovery(), AvahiDiscovery())
            let (firstEvents, secondEvents, observed) = (DiscoveryEventRecorder(), DiscoveryEventRecorder(), DiscoveryEventRecorder())
            let firstRequest = AvahiTestSupport.request(serviceType: type, name: "Twin", port: 40011)
            let secondRequest = AvahiTestSupport.request(serviceType: type, name: "Twin", port: 40012)
            observer.start(AvahiTestSupport.request(serviceType: type, name: "Observer", port: nil), onEvent: observed.onEvent)
            first.start(firstRequest, onEvent: firstEvents.onEvent)
            defer { first.stop(); second.stop(); observer.stop() }
            #expect(try await firstEvents.advertisedName() == "Twin")
            second.start(secondRequest, onEvent: secondEvents.onEvent)
            let renamed = try await secondEvents.advertisedName()
            #expect(renamed != "Twin")
            #expect(renamed.hasPrefix("Twin"))

            let twin = try await observed.found(named: "Twin")
            let other = try await observed.found(named: renamed)
            #expect(twin.peerID == firstRequest.peerID)
            #expect(other.peerID == secondRequest.peerID)
            #expect(other.endpoints.contains(PeerEndpoint(host: "127.0.0.1", port: 40012)))
            // And the two see each other.
            #expect(try await firstEvents.found(named: renamed).peerID == secondRequest.peerID)
            #expect(try await secondEvents.found(named: "Twin").peerID == firstRequest.peerID)
        }

        @Test func noEventArrivesAfterStopReturns() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            discovery.start(AvahiTestSupport.request(serviceType: type, name: "Quiet", port: 40021), onEvent: events.onEvent)
            _ = try await events.advertisedName()
            discovery.stop()
            let countAtStop = events.count
            // Something to report, if the stopped discovery still browsed: a new service and the
            // witness that it is visible (a second discovery finds it).
            let publisher = try ChildProcess("avahi-publish", ["-s", "Late", "_\(type)._tcp", "40022"])
            defer { publisher.terminate() }
            let witness = AvahiDiscovery()
            let witnessed = DiscoveryEventRecorder()
            witness.start(AvahiTestSupport.request(serviceType: type, name: "Witness", port: nil), onEvent: witnessed.onEvent)
            defer { witness.stop() }
            _ = try await witnessed.found(named: "Late")
            #expect(events.count == countAtStop, "events after stop(): \(events.events.dropFirst(countAtStop))")
            discovery.stop()  // A second stop is harmless.
        }

        @Test func stopCalledFromInsideAnEventNeitherDeadlocksNorDeliversMore() async throws {
            try await AvahiTestSupport.requireDaemon()
            let type = AvahiTestSupport.randomServiceType()
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            // The event closure runs on Avahi's poll thread with its lock held; stop() there must
            // hand the teardown to another thread instead of taking the lock again.
            discovery.start(AvahiTestSupport.request(serviceType: type, name: "Impatient", port: 40041)) { event in
                events.onEvent(event)
                if case .advertised = event { discovery.stop() }
            }
            _ = try await events.advertisedName()
            let countAtStop = events.count
            // The advertisement is withdrawn, as a second discovery sees.
            let witness = AvahiDiscovery()
            let witnessed = DiscoveryEventRecorder()
            witness.start(AvahiTestSupport.request(serviceType: type, name: "Witness", port: nil), onEvent: witnessed.onEvent)
            defer { witness.stop() }
            let publisher = try ChildProcess("avahi-publish", ["-s", "Marker", "_\(type)._tcp", "40042"])
            defer { publisher.terminate() }
            _ = try await witnessed.found(named: "Marker")
            // The witness may have caught the advertisement before the teardown withdrew it; then it must see it go.
            if witnessed.events.contains(where: { if case let .found(s) = $0 { s.name == "Impatient" } else { false } }) {
                try await witnessed.first("lost Impatient") { $0 == .lost(key: "Impatient") }
            }
            #expect(events.count == countAtStop, "events after stop(): \(events.events.dropFirst(countAtStop))")
        }

        @Test func anInvalidTXTPairIsReportedAndNothingIsAdvertised() async throws {
            let type = AvahiTestSupport.randomServiceType()
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            let request = AvahiTestSupport.request(serviceType: type, name: "Bad", port: 40031, info: ["a=b": "c"])
            discovery.start(request, onEvent: events.onEvent)
            defer { discovery.stop() }
            let event = try await events.first("failed") { if case .failed = $0 { true } else { false } }
            #expect(event == .failed(.invalidDiscoveryInfo(key: "a=b", reason: "a key must be printable ASCII without '='")))
        }
    }
}
