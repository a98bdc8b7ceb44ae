import Testing
@testable import PeerKit

private struct Known: Codable, Sendable, PeerMessage {
    static var messageType: String { "test.Known" }
    var value: Int
}

@Suite("Messages as wire key and JSON")
struct RawMessageTests {
    private func pair() async throws -> (PeerTransceiver, PeerTransceiver, Peer) {
        let serviceType = randomServiceType()
        let server = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "server"))
        server.respond(to: Known.self) { known, _ in Known(value: known.value * 2) }
        try await server.start()
        let client = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "client", peers: [try endpoint(of: server)]))
        try await client.start()
        let peer = try await client.waitForPeer(timeout: .seconds(20))
        return (server, client, peer)
    }

    @Test("a raw request is answered by the typed handler and the reply comes back as key and JSON")
    func rawRequest() async throws {
        let (server, client, peer) = try await pair()
        defer { server.stop(); client.stop() }
        let reply = try await client.request(RawPeerMessage(type: "test.Known", json: #"{"value":21}"#), to: peer, timeout: .seconds(20))
        #expect(reply.type == "test.Known")
        #expect(reply.json == #"{"value":42}"#)
    }

    @Test("messages with no handler of their own reach receiveUnhandled; handled ones do not")
    func unhandled() async throws {
        let (server, client, peer) = try await pair()
        defer { server.stop(); client.stop() }
        let (seen, continuation) = AsyncStream.makeStream(of: RawPeerMessage.self)
        server.receiveUnhandled { message, _ in continuation.yield(message) }
        try await client.send(RawPeerMessage(type: "test.Known", json: #"{"value":1}"#), to: [peer])
        try await client.send(RawPeerMessage(type: "test.Other", json: #"[1,2]"#), to: [peer])
        let first = try await within(20, "the unhandled message") { await seen.first { _ in true } }
        #expect(first == RawPeerMessage(type: "test.Other", json: "[1,2]"))
    }

    @Test("a raw message that is not JSON, or has a reserved key, is refused before sending", arguments: [
        RawPeerMessage(type: "test.Bad", json: "{nope"),
        RawPeerMessage(type: "peerkit.ping", json: "{}"),
        RawPeerMessage(type: "", json: "{}"),
    ])
    func refused(message: RawPeerMessage) async throws {
        let (server, client, peer) = try await pair()
        defer { server.stop(); client.stop() }
        await #expect(throws: PeerKitError.self) {
            try await client.send(message, to: [peer])
        }
    }
}
