import Foundation
import Testing

/// `listrd --metrics-port`: PeerKit's metrics scraped over HTTP from the real daemon, after the
/// real `listrctl` talked to it (by address, so no avahi-daemon is needed).
@Suite("listrd's metrics endpoint")
struct ListrMetricsEndpointTests {
    @Test("GET /metrics shows the connection and the messages of a listrctl command; other paths get 404")
    func scrape() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--metrics-port", "0"])
        try await daemon.waitFor("its metrics line", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("Serving metrics on http://127.0.0.1:")
        }
        let metricsPort = try #require(Self.metricsPort(in: daemon.stderr), "\(daemon.stderr)")

        // Before any client: the families exist, nothing was received.
        let before = try await Self.get("/metrics", port: metricsPort)
        #expect(before.status == 200, "\(before)")
        #expect(Self.value(of: #"peerkit_messages_received_total{type="AddItemCommand"}"#, in: before.body) == 0, "\(before.body)")

        let result = try await world.ctl("item", "add", "Milk", "--connect", "127.0.0.1:\(port)")
        #expect(result.exit == .status(0), "\(result)")

        let after = try await Self.get("/metrics", port: metricsPort)
        #expect(after.status == 200, "\(after)")
        #expect(after.head.contains("text/plain; version=0.0.4"), "\(after.head)")
        let body = after.body
        #expect(Self.value(of: "peerkit_connections_accepted_total", in: body) == 1, "\(body)")
        #expect(Self.value(of: #"peerkit_messages_received_total{type="AddItemCommand"}"#, in: body) == 1, "\(body)")
        #expect(Self.value(of: #"peerkit_messages_sent_total{type="CLIResponse"}"#, in: body) == 1, "\(body)")
        #expect((Self.value(of: #"peerkit_message_bytes_received_total{type="AddItemCommand"}"#, in: body) ?? 0) >= Double(#"{"title":"Milk"}"#.utf8.count), "\(body)")
        #expect((Self.value(of: "peerkit_wire_bytes_received_total", in: body) ?? 0) > 0, "\(body)")
        #expect(Self.value(of: "peerkit_send_queue_bytes", in: body) == 0, "\(body)")
        #expect(body.contains("# TYPE peerkit_connections gauge"), "\(body)")

        let missing = try await Self.get("/", port: metricsPort)
        #expect(missing.status == 404, "\(missing)")
        let post = try await Self.request("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", port: metricsPort)
        #expect(post.status == 405, "\(post)")
        // A request longer than the server reads is cut off, not buffered.
        let huge = try await Self.request("GET /metrics HTTP/1.1\r\nX-Filler: " + String(repeating: "a", count: 64 * 1024) + "\r\n\r\n", port: metricsPort)
        #expect(huge.status == nil, "\(huge)")
    }

    @Test("listrd refuses a metrics port out of range")
    func badPort() async throws {
        let world = try ListrFixture()
        let daemon = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", world.path("store.sqlite"), "--metrics-port", "70000"],
            name: "listrd --metrics-port 70000", environment: world.keyEnvironment
        )
        let result = try await daemon.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(64), "\(result)")
        #expect(result.stderr.contains("The metrics port 70000 is not between 0 and 65535."), "\(result)")
    }

    @Test("listrd refuses an outbound budget, a slow-peer grace period or a refusal quiet period out of range", arguments: [
        (["--outbound-budget", "0"], "The outbound budget of 0 MiB is not between 1 and 65536 MiB."),
        (["--slow-peer-grace", "0"], "The slow-peer grace period of 0.0 s is not between 0.1 and 3600 seconds."),
        (["--refusal-quiet-period", "7200"], "The refusal quiet period of 7200.0 s is not between 0.1 and 3600 seconds."),
    ])
    func badOutboundLimits(options: [String], message: String) async throws {
        let world = try ListrFixture()
        let daemon = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", world.path("store.sqlite")] + options,
            name: "listrd \(options.joined(separator: " "))", environment: world.keyEnvironment
        )
        let result = try await daemon.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(64), "\(result)")
        #expect(result.stderr.contains(message), "\(result)")
    }

    struct Response: CustomStringConvertible {
        var status: Int?
        var head: String
        var body: String
        var description: String { "status \(status.map(String.init) ?? "none"):\n\(head)\n\n\(body)" }
    }

    static func get(_ path: String, port: Int) async throws -> Response {
        try await request("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", port: port)
    }

    /// Sends `text` on a new connection and reads the answer until the server closes.
    static func request(_ text: String, port: Int) async throws -> Response {
        let raw = try await blocking {
            let socket = try RawSocket.connect(port: port)
            defer { socket.close() }
            socket.setTimeout(seconds: 30)
            socket.write(Array(text.utf8))
            return socket.readToEnd()
        }
        let answer = String(decoding: raw, as: UTF8.self)
        let parts = answer.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let statusLine = head.split(separator: "\r\n").first ?? ""
        let status = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        return Response(status: status, head: head, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    /// The value of the sample whose name and labels are `series`, in Prometheus text.
    static func value(of series: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    static func metricsPort(in log: String) -> Int? {
        guard let range = log.range(of: "Serving metrics on http://127.0.0.1:") else { return nil }
        return Int(log[range.upperBound...].prefix { $0.isNumber })
    }
}
