import Testing
@testable import PeerKit

@Suite("Event descriptions")
struct PeerEventDescriptionTests {
    private let kitchen = Peer(id: "4F1C", name: "Kitchen", discoveryInfo: ["sec": "psk", "role": "store"], isConnected: true)

    @Test("events read as short sentences with no Swift syntax in them", arguments: [
        (PeerEvent.started(port: 0), "started (not listening)"),
        (PeerEvent.started(port: 7000), "started, listening on port 7000"),
        (PeerEvent.peerConnected(Peer(id: "4F1C", name: "Kitchen", isConnected: true)), "connected to peer \"Kitchen\" (4F1C)"),
        (PeerEvent.peerDisconnected(Peer(id: "4F1C", name: "Kitchen", isConnected: false), reason: nil), "disconnected from peer \"Kitchen\" (4F1C)"),
        (PeerEvent.availablePeersChanged([]), "no peers available"),
        (PeerEvent.stopped, "stopped"),
        (PeerEvent.peerJoinedGroup(Peer(id: "4F1C", name: "Kitchen", isConnected: true), group: "lights"), "peer \"Kitchen\" (4F1C) joined group \"lights\""),
        (PeerEvent.peerLeftGroup(Peer(id: "4F1C", name: "Kitchen", isConnected: true), group: "a\nb"), "peer \"Kitchen\" (4F1C) left group \"a\\nb\""),
    ])
    func sentences(event: PeerEvent, expected: String) {
        #expect(event.description == expected)
        #expect("\(event)" == expected)
    }

    @Test("a disconnection's reason is its sentence, not Optional(...)")
    func reason() {
        let event = PeerEvent.peerDisconnected(kitchen, reason: .connectionClosed(peer: "Kitchen"))
        #expect(event.description.hasPrefix("disconnected from peer \"Kitchen\" (4F1C): "))
        #expect(event.description.hasSuffix(PeerKitError.connectionClosed(peer: "Kitchen").description))
        #expect(!event.description.contains("Optional"))
    }

    @Test("a found peer is described with its TXT record, sorted by key")
    func found() {
        #expect(PeerEvent.peerAdded(kitchen).description == "found peer \"Kitchen\" (4F1C) with role=store sec=psk")
        #expect(PeerEvent.availablePeersChanged([kitchen]).description == "1 peer available: \"Kitchen\"")
    }
}
