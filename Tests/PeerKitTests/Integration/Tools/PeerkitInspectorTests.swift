import Foundation
import Testing
@testable import PeerKit

private struct Shout: Codable, Sendable, PeerMessage {
    static var messageType: String { "test.Shout" }
    var text: String
}

@Suite("The peerkit inspector")
struct PeerkitInspectorTests {
    /// A started transceiver on loopback that answers `Greeting` requests.
    private func responder(_ serviceType: String, name: String = "responder") async throws -> PeerTransceiver {
        let transceiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: name))
        transceiver.respond(to: Greeting.self) { greeting, _ in GreetingReply(text: "hello, \(greeting.name)") }
        try await transceiver.start()
        return transceiver
    }

    @Test("every tool prints the package version with --version")
    func versions() async throws {
        for tool in ["peerkit", "listrd", "listrctl"] {
            let result = try await ToolRun.run(tool, ["--version"])
            #expect(result.status == 0, "\(tool): \(result.standardError)")
            #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == PeerKitVersion.current, "\(tool)")
        }
    }

    @Test("peerkit request prints the reply's wire key, its JSON and the round trip")
    func request() async throws {
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType)
        defer { peer.stop() }
        let address = try endpoint(of: peer).description
        let result = try await ToolRun.run("peerkit", ["request", serviceType, "test.Greeting", #"{"name":"Ada"}"#, "--static", address, "--listen-host", "127.0.0.1", "--json", "--timeout", "20"])
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(ToolRun.jsonLines(result.standardOutput).first)
        #expect(line["type"] as? String == "test.GreetingReply")
        #expect((line["payload"] as? [String: Any])?["text"] as? String == "hello, Ada")
        #expect(line["from"] as? String == "responder")
        #expect((line["rttMilliseconds"] as? Double ?? -1) >= 0)
    }

    @Test("peerkit prints a peer's name with its escape sequences, line breaks and bidi overrides escaped, not raw")
    func escapesUntrustedText() async throws {
        // What issue 30 saw printed raw: a window title (OSC), a screen clear and colour (CSI), a
        // forged line, and a right-to-left override.
        let hostile = "evil\u{1B}]0;PWNED\u{07}\u{1B}[2J\nfake line\u{202E}txt"
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType, name: hostile)
        defer { peer.stop() }
        let result = try await ToolRun.run("peerkit", ["request", serviceType, "test.Greeting", #"{"name":"Ada"}"#, "--static", try endpoint(of: peer).description, "--listen-host", "127.0.0.1", "--timeout", "20"])
        #expect(result.status == 0, "\(result.standardError)")
        let output = result.standardOutput
        #expect(output.contains(#"reply from "evil\u{1B}]0;PWNED\u{7}\u{1B}[2J\nfake line\u{202E}txt""#), "\(output)")
        for raw: Unicode.Scalar in ["\u{1B}", "\u{07}", "\u{202E}"] {
            #expect(!output.unicodeScalars.contains(raw), "U+\(String(raw.value, radix: 16)) reached standard output raw: \(output)")
        }
        // Two lines (the reply and the line naming its sender): the name's line feed forged none.
        #expect(output.split(separator: "\n").count == 2, "\(output)")
    }

    @Test("peerkit's options work before the subcommand too")
    func optionsBeforeSubcommand() async throws {
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType)
        defer { peer.stop() }
        let result = try await ToolRun.run("peerkit", ["--static", try endpoint(of: peer).description, "--listen-host", "127.0.0.1", "--json", "--timeout", "20", "request", serviceType, "test.Greeting", #"{"name":"Bo"}"#])
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(ToolRun.jsonLines(result.standardOutput).first, "\(result.standardOutput)")
        #expect((line["payload"] as? [String: Any])?["text"] as? String == "hello, Bo")
    }

    @Test("peerkit request ends with status 1 and the peer's reason when the peer answers with an error")
    func requestRefused() async throws {
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType)
        defer { peer.stop() }
        let result = try await ToolRun.run("peerkit", ["request", serviceType, "test.Unknown", "{}", "--static", try endpoint(of: peer).description, "--listen-host", "127.0.0.1", "--timeout", "20"])
        #expect(result.status == 1)
        #expect(result.standardError.contains("test.Unknown"), "\(result.standardError)")
    }

    @Test("peerkit send refuses a payload that is not JSON with status 64, before joining anything")
    func sendRefusesBadJSON() async throws {
        let result = try await ToolRun.run("peerkit", ["send", randomServiceType(), "test.Shout", "{not json", "--static", "127.0.0.1:9"])
        #expect(result.status == 64)
        #expect(result.standardError.contains("is not JSON text"), "\(result.standardError)")
    }

    @Test("peerkit send delivers the message to the named peer")
    func send() async throws {
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType)
        defer { peer.stop() }
        let (shouts, continuation) = AsyncStream.makeStream(of: Shout.self)
        peer.receive(Shout.self) { continuation.yield($0) }
        let result = try await ToolRun.run("peerkit", ["send", serviceType, "test.Shout", #"{"text":"hi"}"#, "--to", "responder", "--static", try endpoint(of: peer).description, "--listen-host", "127.0.0.1", "--timeout", "20"])
        #expect(result.status == 0, "\(result.standardError)")
        let shout = try await within(20, "the shout") { await shouts.first { _ in true } }
        #expect(shout?.text == "hi")
    }

    @Test("peerkit send --group delivers to the group's members once one is known, and reports them")
    func sendToGroup() async throws {
        let serviceType = randomServiceType()
        let member = try await responder(serviceType, name: "member")
        defer { member.stop() }
        try member.join("kitchen")
        let (shouts, continuation) = AsyncStream.makeStream(of: Shout.self)
        member.receive(Shout.self) { continuation.yield($0) }
        let result = try await ToolRun.run("peerkit", ["send", serviceType, "test.Shout", #"{"text":"to the kitchen"}"#, "--group", "kitchen", "--static", try endpoint(of: member).description, "--listen-host", "127.0.0.1", "--json", "--timeout", "20"])
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(ToolRun.jsonLines(result.standardOutput).first, "\(result.standardOutput)")
        #expect(line["group"] as? String == "kitchen")
        #expect(line["to"] as? [String] == ["member"])
        let shout = try await within(20, "the group message") { await shouts.first { _ in true } }
        #expect(shout?.text == "to the kitchen")

        let nobody = try await ToolRun.run("peerkit", ["send", serviceType, "test.Shout", "{}", "--group", "attic", "--static", try endpoint(of: member).description, "--listen-host", "127.0.0.1", "--timeout", "1"])
        #expect(nobody.status == 69)
        #expect(nobody.standardError.contains("in group \"attic\" was found within 1 s"), "\(nobody.standardError)")
    }

    @Test("peerkit ping reports one answer per probe and the statistics")
    func ping() async throws {
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType)
        defer { peer.stop() }
        let result = try await ToolRun.run("peerkit", ["ping", serviceType, "responder", "--count", "3", "--interval", "0", "--static", try endpoint(of: peer).description, "--listen-host", "127.0.0.1", "--json", "--timeout", "20"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = ToolRun.jsonLines(result.standardOutput)
        #expect(lines.filter { $0["seq"] != nil }.count == 3)
        let summary = try #require(lines.last)
        #expect(summary["sent"] as? Int == 3)
        #expect(summary["received"] as? Int == 3)
    }

    @Test("peerkit ping to a peer that never shows up ends with status 69 and says so")
    func pingNobody() async throws {
        let result = try await ToolRun.run("peerkit", ["ping", randomServiceType(), "ghost", "--static", "127.0.0.1:9", "--listen-host", "127.0.0.1", "--timeout", "1"])
        #expect(result.status == 69)
        #expect(!result.standardError.isEmpty)
    }

    @Test("--log-level notice logs PeerKit's notices to stderr without its debug lines; an unknown level, or one beside --verbose, is refused")
    func logLevel() async throws {
        let result = try await ToolRun.run("peerkit", ["ping", randomServiceType(), "ghost", "--static", "127.0.0.1:9", "--listen-host", "127.0.0.1", "--timeout", "1", "--log-level", "notice"])
        #expect(result.status == 69)
        #expect(result.standardError.contains(" notice peerkit: [PeerKit] Cannot reach \"127.0.0.1:9\""), "\(result.standardError)")
        #expect(!result.standardError.contains(" debug peerkit:"), "\(result.standardError)")

        let unknown = try await ToolRun.run("peerkit", ["ping", randomServiceType(), "ghost", "--log-level", "loud"])
        #expect(unknown.status == 64)
        #expect(unknown.standardError.contains("loud"), "\(unknown.standardError)")
        let both = try await ToolRun.run("peerkit", ["ping", randomServiceType(), "ghost", "--verbose", "--log-level", "info"])
        #expect(both.status == 64)
        #expect(both.standardError.contains("--verbose means --log-level debug, and --log-level info was given too"), "\(both.standardError)")
    }

    @Test("peerkit tail prints a broadcast message with its sender, wire key and payload")
    func tail() async throws {
        let serviceType = randomServiceType()
        let peer = try await responder(serviceType, name: "shouter")
        defer { peer.stop() }
        let address = try endpoint(of: peer).description
        // Broadcast until the inspector has printed one and quit: a broadcast before the
        // inspector connected, or before it registered its handler, reaches nobody.
        let shouting = Task {
            _ = try await peer.waitForPeer(timeout: .seconds(60))
            while !Task.isCancelled {
                peer.broadcast(Shout(text: "all hands"))
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { shouting.cancel() }
        let result = try await ToolRun.run("peerkit", ["tail", serviceType, "--static", address, "--listen-host", "127.0.0.1", "--json", "--count", "1", "--duration", "60"])
        #expect(result.status == 0, "\(result.standardError)")
        let messages = ToolRun.jsonLines(result.standardOutput).filter { $0["type"] != nil }
        #expect(messages.count == 1, "--count 1 printed \(messages.count) messages: \(result.standardOutput)")
        let first = try #require(messages.first, "no message in \(result.standardOutput)")
        #expect(first["type"] as? String == "test.Shout")
        #expect(first["from"] as? String == "shouter")
        #expect((first["payload"] as? [String: Any])?["text"] as? String == "all hands")
    }
}

extension PeerkitInspectorTests {
    @Test("peerkit browse lists a peer found through avahi-daemon with its TXT record and security mode, and not its own leaving")
    func browse() async throws {
        try await AvahiTestSupport.requireDaemon()
        let serviceType = AvahiTestSupport.randomServiceType()
        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = "advertised"
        configuration.listenHost = "127.0.0.1"
        configuration.discoveryInfo = ["role": "store"]
        // With a key: the TXT record says sec=psk, and the inspector needs the same key to connect.
        configuration.security = .preSharedKey(try PeerKey(passphrase: "inspector test passphrase"))
        let peer = PeerTransceiver(configuration: configuration)
        try await peer.start()
        defer { peer.stop() }
        let result = try await ToolRun.run("peerkit", [
            "browse", serviceType, "--listen-host", "127.0.0.1", "--json", "--duration", "5",
            "--passphrase", "inspector test passphrase",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = ToolRun.jsonLines(result.standardOutput)
        let found = try #require(lines.first { $0["event"] as? String == "found" }, "\(result.standardOutput)")
        #expect(found["name"] as? String == "advertised")
        #expect(found["id"] as? String == peer.peerID)
        #expect(found["security"] as? String == "psk")
        #expect((found["info"] as? [String: Any])?["role"] as? String == "store")
        #expect(lines.contains { $0["event"] as? String == "connected" })
        // The peer stayed up: the inspector's own shutdown is not reported as the peer leaving.
        #expect(!lines.contains { $0["event"] as? String == "lost" })
    }
}
