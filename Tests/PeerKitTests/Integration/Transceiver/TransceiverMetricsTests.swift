import Clocks
import Foundation
import MetricsTestKit
import NIOCore
import Testing
@testable import PeerKit

/// PeerKit's swift-metrics instruments, read from a `TestMetrics` factory of each transceiver's
/// own (``PeerConfiguration/metricsFactory``) while real transceivers talk over loopback TCP.
@Suite("Transceiver metrics over loopback TCP")
struct TransceiverMetricsTests {
    /// A listening server and a client that dialled it, each with its own metrics, connected.
    private static func connectedPair(serverMetrics: TestMetrics, clientMetrics: TestMetrics, clientClock: TestClock<Duration>? = nil) async throws -> (server: PeerTransceiver, client: PeerTransceiver, serverPeer: Peer) {
        let serviceType = randomServiceType()
        var serverConfiguration = loopbackConfiguration(serviceType: serviceType, name: "server")
        serverConfiguration.metricsFactory = serverMetrics
        let server = PeerTransceiver(configuration: serverConfiguration)
        try await server.start()
        var clientConfiguration = loopbackConfiguration(serviceType: serviceType, name: "client", peers: [try endpoint(of: server)])
        clientConfiguration.advertises = false
        clientConfiguration.metricsFactory = clientMetrics
        if let clientClock { clientConfiguration.clock = clientClock }
        let client = PeerTransceiver(configuration: clientConfiguration)
        try await client.start()
        let serverPeer = try await client.waitForPeer(timeout: .seconds(20))
        try await within(20, "the server to see the client") {
            while server.connectedPeers.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        }
        return (server, client, serverPeer)
    }

    /// Waits until `condition` holds (metrics of the other side are updated on its own threads).
    private static func eventually(_ what: String, _ condition: @escaping @Sendable () throws -> Bool) async throws {
        try await within(20, what) {
            while try !condition() { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    private static func counter(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        metrics.counterTotal(label: label, dimensions: dimensions)
    }

    private static func meter(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) -> Double {
        (try? metrics.expectMeter(label, dimensions).lastValue) ?? 0
    }

    @Test("a request and its reply are counted by type key on both sides, with the connection open and the latency recorded")
    func requestAndReply() async throws {
        let serverMetrics = TestMetrics()
        let clientMetrics = TestMetrics()
        let (server, client, serverPeer) = try await Self.connectedPair(serverMetrics: serverMetrics, clientMetrics: clientMetrics)
        defer { client.stop(); server.stop() }
        server.respond(to: Question.self) { question, _ in Answer(text: question.text.uppercased(), from: "server") }

        #expect(Self.counter(serverMetrics, "peerkit_connections_accepted_total") == 1)
        #expect(Self.counter(clientMetrics, "peerkit_connections_dialled_total") == 1)
        #expect(Self.meter(serverMetrics, "peerkit_connections", [("state", "open")]) == 1)
        #expect(Self.meter(clientMetrics, "peerkit_connections", [("state", "open")]) == 1)
        #expect(Self.meter(serverMetrics, "peerkit_connections", [("state", "handshaking")]) == 0)

        let answer = try await client.request(Question(text: "hi"), to: serverPeer, expecting: Answer.self, timeout: .seconds(20))
        #expect(answer.text == "HI")

        let question = [("type", "Question")]
        let answerType = [("type", "Answer")]
        let questionBytes = Int64(#"{"text":"hi"}"#.utf8.count)
        #expect(Self.counter(clientMetrics, "peerkit_messages_sent_total", question) == 1)
        #expect(Self.counter(clientMetrics, "peerkit_message_bytes_sent_total", question) == questionBytes)
        #expect(Self.counter(clientMetrics, "peerkit_messages_received_total", answerType) == 1)
        #expect(Self.counter(serverMetrics, "peerkit_messages_received_total", question) == 1)
        #expect(Self.counter(serverMetrics, "peerkit_message_bytes_received_total", question) == questionBytes)
        try await Self.eventually("the server to count its reply") {
            Self.counter(serverMetrics, "peerkit_messages_sent_total", answerType) == 1
        }
        let latency = try clientMetrics.expectTimer("peerkit_request_duration_seconds")
        #expect(latency.values.count == 1)
        #expect((latency.lastValue ?? 0) > 0)
        #expect(Self.counter(clientMetrics, "peerkit_requests_timed_out_total") == 0)
        #expect(Self.counter(clientMetrics, "peerkit_wire_bytes_sent_total") > questionBytes)
        #expect(Self.counter(serverMetrics, "peerkit_wire_bytes_received_total") > questionBytes)
        try await Self.eventually("the queues to be empty again") {
            Self.meter(clientMetrics, "peerkit_send_queue_bytes") == 0
                && Self.meter(serverMetrics, "peerkit_send_queue_bytes") == 0
                && Self.meter(serverMetrics, "peerkit_receive_queue_bytes") == 0
        }
    }

    @Test("type keys this side never used are counted under \"other\", so a peer cannot invent label values")
    func inventedKeys() async throws {
        let serverMetrics = TestMetrics()
        let (server, client, serverPeer) = try await Self.connectedPair(serverMetrics: serverMetrics, clientMetrics: TestMetrics())
        defer { client.stop(); server.stop() }
        let inbox = Inbox<String>()
        server.receive(Note.self) { note in inbox.put(note.text) }
        for index in 0..<5 {
            try await client.send(RawPeerMessage(type: "Invented\(index)", json: "{}"), to: [serverPeer])
        }
        try await client.send(Note(text: "marker"), to: [serverPeer])
        #expect(try await inbox.take(1) == ["marker"])

        #expect(Self.counter(serverMetrics, "peerkit_messages_received_total", [("type", "other")]) == 5)
        #expect(Self.counter(serverMetrics, "peerkit_messages_received_total", [("type", "Note")]) == 1)
        let labels = Set(serverMetrics.counters(label: "peerkit_messages_received_total").flatMap { $0.dimensions.map(\.1) })
        #expect(labels == ["other", "Note"])
    }

    @Test("at most the label limit of type keys get labels of their own; further ones count as other")
    func labelLimit() {
        let metrics = TestMetrics()
        let peerMetrics = PeerMetrics(factory: metrics)
        for index in 0..<(PeerMetrics.maximumTypeLabels + 10) {
            peerMetrics.usedType("Key\(index)").sent(payloadBytes: 1)
        }
        #expect(peerMetrics.usedType("Key0") !== peerMetrics.otherType)
        #expect(peerMetrics.usedType("Key\(PeerMetrics.maximumTypeLabels)") === peerMetrics.otherType)
        #expect(metrics.counters(label: "peerkit_messages_sent_total").count == PeerMetrics.maximumTypeLabels + 1)
        #expect(Self.counter(metrics, "peerkit_messages_sent_total", [("type", "other")]) == 10)
        #expect(peerMetrics.receivedType("Unseen") === peerMetrics.otherType)
    }

    @Test("a request that gets no reply in time is counted as timed out", .timeLimit(.minutes(1)))
    func requestTimeout() async throws {
        let clientMetrics = TestMetrics()
        // The request's timeout runs on the client's test clock, moved by hand; the server answers
        // only when the test ends, so the timeout comes first by construction, not by wall-clock luck.
        let clientClock = TestClock()
        let (server, client, serverPeer) = try await Self.connectedPair(serverMetrics: TestMetrics(), clientMetrics: clientMetrics, clientClock: clientClock)
        let release = AsyncStream.makeStream(of: Void.self)
        defer { release.continuation.finish(); client.stop(); server.stop() }
        server.respond(to: Question.self) { _, _ in
            for await _ in release.stream {}
            return Answer(text: "late", from: "server")
        }
        // Task.immediate: the request is sent, and its timeout set, before the clock moves.
        let request = Task.immediate {
            try await client.request(Question(text: "slow"), to: serverPeer, expecting: Answer.self, timeout: .milliseconds(200))
        }
        await clientClock.advance(by: .milliseconds(200))
        let error = await #expect(throws: PeerKitError.self) { try await request.value }
        #expect(error?.code == .requestTimedOut, "\(String(describing: error))")
        #expect(Self.counter(clientMetrics, "peerkit_requests_timed_out_total") == 1)
        #expect((try? clientMetrics.expectTimer("peerkit_request_duration_seconds").values.count) ?? 0 == 0)
    }

    @Test("a peer that sends a malformed frame is counted as dropped by reason, and leaves the open gauge")
    func droppedByReason() async throws {
        let metrics = TestMetrics()
        var configuration = loopbackConfiguration(serviceType: randomServiceType(), name: "server")
        configuration.metricsFactory = metrics
        // The raw peer answers no pings: it must not time out before it misbehaves, however busy the machine.
        configuration.heartbeatInterval = .seconds(60)
        configuration.peerTimeout = .seconds(120)
        // Nor to the handshake timeout while the test's task waits for a thread to send its hello.
        configuration.handshakeTimeout = .seconds(120)
        let server = PeerTransceiver(configuration: configuration)
        try await server.start()
        defer { server.stop() }
        let raw = try await RawPeer(connectingTo: try endpoint(of: server))
        defer { raw.close() }
        try await raw.sayHello(serviceType: configuration.serviceType)
        try await Self.eventually("the raw peer to be open") {
            Self.meter(metrics, "peerkit_connections", [("state", "open")]) == 1
        }
        try await raw.send(#"["type","payload"]"#)  // not an envelope: the connection is failed
        try await Self.eventually("the drop to be counted") {
            Self.counter(metrics, "peerkit_connections_dropped_total", [("reason", "malformed")]) == 1
        }
        try await Self.eventually("the connection to leave every gauge") {
            Self.meter(metrics, "peerkit_connections", [("state", "open")]) == 0
                && Self.meter(metrics, "peerkit_connections", [("state", "closing")]) == 0
                && Self.meter(metrics, "peerkit_connections", [("state", "handshaking")]) == 0
        }
        #expect(Self.counter(metrics, "peerkit_connections_accepted_total") == 1)
    }

    @Test("a connection over maximumConnections is counted as refused by that limit")
    func refusedAtLimit() async throws {
        let metrics = TestMetrics()
        var configuration = loopbackConfiguration(serviceType: randomServiceType(), name: "server")
        configuration.metricsFactory = metrics
        configuration.maximumConnections = 1
        // The first connection never says hello: it must hold its slot however busy the machine.
        configuration.handshakeTimeout = .seconds(120)
        configuration.preHandshakeTimeout = .seconds(120)
        let server = PeerTransceiver(configuration: configuration)
        try await server.start()
        defer { server.stop() }
        let first = try await RawPeer(connectingTo: try endpoint(of: server))
        defer { first.close() }
        try await Self.eventually("the first connection to be accepted") {
            Self.counter(metrics, "peerkit_connections_accepted_total") == 1
        }
        let second = try await RawPeer(connectingTo: try endpoint(of: server))
        defer { second.close() }
        try await Self.eventually("the second connection to be refused (accepted: \(Self.counter(metrics, "peerkit_connections_accepted_total")))") {
            Self.counter(metrics, "peerkit_connections_refused_total", [("reason", "connection_limit")]) == 1
        }
        #expect(Self.counter(metrics, "peerkit_connections_accepted_total") == 1)
    }
}
