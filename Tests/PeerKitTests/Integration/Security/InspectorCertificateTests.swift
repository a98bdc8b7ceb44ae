import Foundation
import Testing
@testable import PeerKit

@Suite("The peerkit inspector in certificates mode")
struct InspectorCertificateTests {
    @Test("peerkit identity create prints the new identity's fingerprint; a transceiver that pins it answers peerkit request --identity, and one that does not is refused with a sentence")
    func identityAndRequest() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        handToToolUser([directory])
        let path = directory + "/inspector"

        let created = try await ToolRun.run("peerkit", ["identity", "create", path])
        #expect(created.status == 0, "\(created.standardError)")
        let fingerprint = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(fingerprint.count == 64, "\(created.standardOutput)")
        var info = stat()
        #expect(stat(path + ".key", &info) == 0 && info.st_mode & 0o777 == 0o600)
        let shown = try await ToolRun.run("peerkit", ["identity", "show", path])
        #expect(shown.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == fingerprint)
        let again = try await ToolRun.run("peerkit", ["identity", "create", path])
        #expect(again.status == 73, "an existing identity was overwritten: \(again.standardOutput)")

        let serviceType = randomServiceType()
        let responderIdentity = try PeerIdentity.generate(name: "responder")
        let responder = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "responder", identity: responderIdentity, trust: try .pinned([fingerprint])))
        responder.respond(to: Greeting.self) { greeting, peer in GreetingReply(text: "hello, \(greeting.name), \(peer.fingerprint ?? "no fingerprint")") }
        try await responder.start()
        defer { responder.stop() }
        let address = try endpoint(of: responder).description
        let common = ["--static", address, "--listen-host", "127.0.0.1", "--json", "--timeout", "20", "--identity", path]

        let result = try await ToolRun.run("peerkit", ["request", serviceType, "test.Greeting", #"{"name":"Ada"}"#, "--trust", responderIdentity.fingerprint] + common)
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(ToolRun.jsonLines(result.standardOutput).first)
        #expect((line["payload"] as? [String: Any])?["text"] as? String == "hello, Ada, \(fingerprint)")

        // The inspector does not trust a key it was not told to: it refuses the responder.
        let distrust = try await ToolRun.run("peerkit", ["request", serviceType, "test.Greeting", #"{"name":"Bo"}"#, "--trust", try PeerIdentity.generate().fingerprint] + common)
        #expect(distrust.status == 77, "\(distrust.standardError)")
        #expect(distrust.standardError.contains("presented a certificate whose public key has the fingerprint \(responderIdentity.fingerprint), which we do not trust"), "\(distrust.standardError)")

        let noTrust = try await ToolRun.run("peerkit", ["request", serviceType, "test.Greeting", "{}"] + common)
        #expect(noTrust.status == 64)
        #expect(noTrust.standardError.contains("needs the peers to trust"), "\(noTrust.standardError)")
    }
}
