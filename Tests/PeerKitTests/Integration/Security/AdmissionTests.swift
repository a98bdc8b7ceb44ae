import Clocks
import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import PeerKit

@Suite("The admission hook")
struct AdmissionTests {
    @Test("a peer the hook refuses is disconnected before any of its messages is delivered, and does not redial; another is admitted")
    func refuses() async throws {
        let serviceType = randomServiceType()
        let key = PeerKey.random()
        var serverConfiguration = secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(key))
        serverConfiguration.admission = { peer in peer.name != "mallory" }
        // Mallory dialled, so it drives the heartbeat, and its clock (below) never moves: it
        // never pings. The server's own ping then comes as late as a tick before its timeout,
        // and in the parallel run neither the verdict nor mallory's pong may come within that
        // tick: the server once dropped mallory for silence (2.558 s) before it refused it, and
        // mallory, whose back-off never ends, never came back to be refused.
        serverConfiguration.peerTimeout = .seconds(60)
        // Both logs, for the failure message: once in 8 runs of the whole suite, the refusal had
        // not come after 20 s, and the server had reported nothing but its start.
        let serverLines = CapturedLog(), malloryLines = CapturedLog()
        serverConfiguration.logger = serverLines.logger
        let server = PeerTransceiver(configuration: serverConfiguration)
        let serverLog = EventLog(server)
        let inbox = Inbox<String>()
        server.receive(Note.self) { note, sender in inbox.put("\(sender.name):\(note.text)") }
        try await server.start()
        defer { server.stop() }

        // Mallory's timers (its back-off among them) run on a test clock, moved by hand below.
        let malloryClock = TestClock()
        var malloryConfiguration = secureConfiguration(serviceType: serviceType, name: "mallory", security: .preSharedKey(key), peers: [try endpoint(of: server)])
        malloryConfiguration.clock = malloryClock
        malloryConfiguration.logger = malloryLines.logger
        let mallory = PeerTransceiver(configuration: malloryConfiguration)
        let malloryLog = EventLog(mallory)
        try await mallory.start()
        defer { mallory.stop() }
        // Mallory's own side admits the server and sends at once.
        let serverPeer = try await mallory.waitForPeer(timeout: .seconds(20))
        try? await mallory.send(Note(text: "let me in"), to: [serverPeer])
        do {
            try await serverLog.waitForError("the refusal") { $0.code == .admissionRefused }
        } catch {
            Issue.record("The server's log:\n\(serverLines.messages().joined(separator: "\n"))\nMallory's log:\n\(malloryLines.messages().joined(separator: "\n"))")
            throw error
        }
        let alice = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "alice", security: .preSharedKey(key), peers: [try endpoint(of: server)]))
        try await alice.start()
        defer { alice.stop() }
        let aliceServer = try await alice.waitForPeer(timeout: .seconds(20))
        try await alice.send(Note(text: "hi"), to: [aliceServer])
        #expect(try await inbox.take(1) == ["alice:hi"], "mallory's message was never delivered")
        try await within(20, "alice's peerConnected") {
            while serverLog.connected.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(serverLog.connected.map(\.name) == ["alice"])
        // Mallory is told why, and does not redial: with its clock moved past every back-off delay,
        // no timer of it is left (a redial would be one, and would arm a connect timeout).
        try await malloryLog.waitForError("mallory's refusal") { $0.description.contains(AdmissionGate.refusedReason) }
        #expect(try await timeUntilNextTimerAfterAdvancing(mallory, clock: malloryClock) == nil, "mallory redials the peer that refused it")
        #expect(malloryLog.connected.count == 1, "\(malloryLog.all)")
        #expect(serverLog.errors.filter { $0.code == .admissionRefused }.count == 1, "\(serverLog.errors)")
    }

    @Test("messages that arrive while the hook decides are held and delivered in order once the peer is admitted")
    func holdsMessages() async throws {
        let serviceType = randomServiceType()
        var serverConfiguration = loopbackConfiguration(serviceType: serviceType, name: "server")
        let release = AsyncStream.makeStream(of: Void.self)
        serverConfiguration.admission = { _ in
            for await _ in release.stream { return true }
            return false
        }
        let server = PeerTransceiver(configuration: serverConfiguration)
        let inbox = Inbox<String>()
        server.receive(Note.self) { note in inbox.put(note.text) }
        try await server.start()
        defer { server.stop() }
        let client = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "client", peers: [try endpoint(of: server)]))
        try await client.start()
        defer { client.stop() }
        let peer = try await client.waitForPeer(timeout: .seconds(20))
        for n in 1...3 { try await client.send(Note(text: "\(n)"), to: [peer]) }
        #expect(server.connectedPeers.isEmpty, "not connected before the verdict")
        release.continuation.yield()
        #expect(try await inbox.take(3) == ["1", "2", "3"])
        #expect(server.connectedPeers.map(\.name) == ["client"])
    }
}

@Suite("The admission hook's lifetime")
struct AdmissionLifetimeTests {
    @Test("an admission hook still deciding when the transceiver stops is cancelled: no work outlives the session")
    func hookEndsWithSession() async throws {
        let serviceType = randomServiceType()
        let key = PeerKey.random()
        let started = Flag(), cancelled = Flag()
        var serverConfiguration = secureConfiguration(serviceType: serviceType, name: "server", security: .preSharedKey(key))
        // The hook's own deadline (the handshake timeout) is far away: only the session ending can end it.
        serverConfiguration.handshakeTimeout = .seconds(600)
        serverConfiguration.admission = { _ in
            started.set()
            try? await Task.sleep(for: .seconds(600))
            if Task.isCancelled { cancelled.set() }
            return false
        }
        let server = PeerTransceiver(configuration: serverConfiguration)
        try await server.start()
        let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: .preSharedKey(key), peers: [try endpoint(of: server)]))
        try await client.start()
        defer { client.stop() }
        try await within(20, "the hook to start deciding") {
            while !started.isSet { try await Task.sleep(for: .milliseconds(10)) }
        }
        server.stop()
        try await within(20, "the hook to be cancelled by the session's end") {
            while !cancelled.isSet { try await Task.sleep(for: .milliseconds(10)) }
        }
    }
}

/// Set once, read from anywhere.
private final class Flag: Sendable {
    private let value = NIOLockedValueBox(false)
    func set() { value.withLockedValue { $0 = true } }
    var isSet: Bool { value.withLockedValue { $0 } }
}
