import Foundation
import Testing
@testable import PeerKit

/// The Python client in Documentation/Protocol.md, run against a transceiver on loopback TCP.
@Suite("Protocol.md's Python client against a real transceiver")
struct ProtocolPythonClientTests {
    struct ListItemsCommand: Codable {}
    struct CLIResponse: Codable { var message: String }

    @Test("the document's Python client talks to a real transceiver")
    func pythonClient() async throws {
        var script = try #require(ProtocolDocumentTests.blocks("python").first)
        let serviceType = randomServiceType()
        let transceiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "store"))
        try await transceiver.start()
        defer { transceiver.stop() }
        transceiver.respond(to: ListItemsCommand.self) { _, sender in CLIResponse(message: "[ ] Milk for \(sender.name)") }
        let port = try #require(transceiver.listeningPort)
        script = script.replacingOccurrences(of: "7000", with: String(port)).replacingOccurrences(of: "\"listrctl\"", with: "\"\(serviceType)\"")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        let output = Pipe()
        process.standardOutput = output
        let exit = try process.runWatched()
        let (text, status) = try await within(30, "the Python client") {
            let data = await output.fileHandleForReading.readToEndOnOwnThread()
            return (String(decoding: data, as: UTF8.self), await exit.value)
        }
        #expect(status == 0)
        #expect(text.contains("'type': 'peerkit.hello'"))
        #expect(text.contains("'name': 'store'"))
        #expect(text.contains("{'type': 'CLIResponse', 'replyTo': '1', 'payload': {'message': '[ ] Milk for python'}}"))
    }
}
