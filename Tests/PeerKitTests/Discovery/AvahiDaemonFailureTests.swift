import Foundation
import PeerKit
import Testing

extension DiscoveryTests {
    /// What AvahiDiscovery does when avahi-daemon is missing, appears later, or restarts.
    ///
    /// libdbus reads `DBUS_SYSTEM_BUS_ADDRESS` once per process, when it first connects, and Avahi
    /// offers no other way to choose the bus. So each test runs its body in a child process
    /// (Swift Testing's exit tests) and sets the variable there, before any D-Bus call: the shared
    /// test process, and the shared daemon, are never touched.
    @Suite("Avahi when the daemon is missing or restarts")
    struct AvahiDaemonFailureTests {
        @Test func anUnreachableDaemonIsReportedAtOnceWithWhatToDo() async {
            await #expect(processExitsWith: .success) {
                do { try await Self.unreachableDaemon() } catch { Issue.record(error) }
            }
        }

        @Test func aDaemonThatAppearsLaterOrRestartsIsUsedAgainByItself() async {
            await #expect(processExitsWith: .success) {
                do { try await Self.daemonAppearsAndRestarts() } catch { Issue.record(error) }
            }
        }

        // MARK: - Scenarios, run in the child process

        private static func unreachableDaemon() async throws {
            setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/peerkit-no-bus", 1)
            let type = AvahiTestSupport.randomServiceType()
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            let started = ContinuousClock.now
            discovery.start(AvahiTestSupport.request(serviceType: type, name: "Lonely", port: 40600), onEvent: events.onEvent)
            let event = try await events.first("failed", timeout: .seconds(5)) { if case .failed = $0 { true } else { false } }
            let elapsed = ContinuousClock.now - started
            guard case let .failed(error) = event, case .discoveryUnavailable(type, _) = error else {
                throw ChildFailure("expected discoveryUnavailable for \(type), got \(event)")
            }
            guard elapsed < .seconds(1) else { throw ChildFailure("the failure took \(elapsed) to arrive") }
            let message = error.description
            guard message.contains("avahi-daemon cannot be reached"), message.contains("Start avahi-daemon"),
                  message.contains("static peers") else {
                throw ChildFailure("the message does not say what happened and what to do: \(message)")
            }
            // It keeps trying, quietly: no second failure for the same outage, no crash, and stop() returns.
            discovery.stop()
            guard events.events.count == 1 else { throw ChildFailure("more than one event: \(events.events)") }
        }

        private static func daemonAppearsAndRestarts() async throws {
            let daemon = try PrivateAvahiDaemon()
            setenv("DBUS_SYSTEM_BUS_ADDRESS", daemon.busAddress, 1)
            let type = AvahiTestSupport.randomServiceType()
            let discovery = AvahiDiscovery()
            let events = DiscoveryEventRecorder()
            discovery.start(AvahiTestSupport.request(serviceType: type, name: "Survivor", port: 40700), onEvent: events.onEvent)
            defer { discovery.stop() }

            // No bus, no daemon yet.
            try await events.first("failed while absent", timeout: .seconds(5)) { if case .failed = $0 { true } else { false } }

            // The daemon appears: discovery recovers, advertises and browses.
            try await daemon.start()
            try await events.first("recovered") { $0 == .recovered }
            guard try await events.advertisedName() == "Survivor" else { throw ChildFailure("advertised under another name: \(events.events)") }
            var foreign = try daemon.publish("Before Restart", type: "_\(type)._tcp", port: 40701)
            _ = try await events.found(named: "Before Restart")

            // The daemon dies and comes back: a new client registers and browses again.
            let mark = events.count
            daemon.stopDaemon()
            foreign.terminate()
            try await events.first("failed after the daemon died", after: mark) { if case .failed = $0 { true } else { false } }
            try await daemon.start()
            try await events.first("recovered after restart", after: mark) { $0 == .recovered }
            guard try await events.advertisedName(after: mark) == "Survivor" else { throw ChildFailure("not advertised again: \(events.events)") }
            foreign = try daemon.publish("After Restart", type: "_\(type)._tcp", port: 40702)
            defer { foreign.terminate() }
            let after = try await events.found(named: "After Restart", after: mark)
            guard after.endpoints.contains(PeerEndpoint(host: "127.0.0.1", port: 40702)) else { throw ChildFailure("wrong endpoints: \(after)") }
            // The instance that did not come back is reported lost once the new browser listed everything.
            try await events.first("lost Before Restart", after: mark) { $0 == .lost(key: "Before Restart") }
            // And the restarted daemon really holds the advertisement.
            let lines = try await daemon.browseResolved("_\(type)._tcp")
            guard lines.contains(where: { $0.count > 8 && $0[3] == "Survivor" && $0[8] == "40700" }) else {
                throw ChildFailure("avahi-browse on the restarted daemon does not show Survivor:40700: \(lines)")
            }
        }
    }
}

/// A failed check inside an exit test's child process; recorded as an issue there, which Swift
/// Testing reports in the parent.
struct ChildFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
