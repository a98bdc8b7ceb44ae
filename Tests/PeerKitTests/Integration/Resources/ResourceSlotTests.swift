import Foundation
import Testing
@testable import PeerKit

/// The receiver's resource slots against senders that claim as many peer IDs as they like: the
/// limits count what a sender cannot choose (its connection, its address), never its peer ID.
@Suite("Resource slots counted by what a sender cannot choose")
struct ResourceSlotTests {
    /// A raw peer from `source` that said hello as `peerID`, and whose offers can be answered.
    func rawSender(to endpoint: PeerEndpoint, from source: String, peerID: String, serviceType: String) async throws -> RawPeer {
        let raw = try await RawPeer(connectingTo: endpoint, from: source)
        try await raw.sayHello(serviceType: serviceType, peerID: peerID, name: peerID, features: ["resources"])
        _ = try #require(await raw.nextFrame(), "the receiver closed the connection of \(peerID)")
        return raw
    }

    /// Offers `transfer` and returns the receiver's answer: accept or refuse, with its reason.
    func offer(_ transfer: Int, on raw: RawPeer) async throws -> String {
        try await raw.send(#"{"type":"peerkit.resource.offer","payload":{"transfer":\#(transfer),"name":"held","size":1}}"#)
        while let frame = await raw.nextFrame() {
            if frame.contains("peerkit.resource.accept") || frame.contains("peerkit.resource.refuse") { return frame }
        }
        return "the connection closed"
    }

    @Test("two connections from one address, claiming two peer IDs, hold at most all slots but one; a sender from another address gets the last")
    func oneAddressNeverHoldsEverySlot() async throws {
        let serviceType = randomServiceType()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "receiver")
        // Raw peers answer no pings: a loaded machine must not lose them to the heartbeat, nor
        // their hellos to the handshake timeout (a fresh-clone CI run once saw a raw peer's hello
        // take over 5 s, with every suite running on 2 cores).
        configuration.peerTimeout = .seconds(60)
        configuration.handshakeTimeout = .seconds(30)
        let receiver = PeerTransceiver(configuration: configuration)
        try await receiver.start()
        defer { receiver.stop() }
        let release = Inbox<Void>()
        receiver.receiveResources(named: "held") { resource in
            _ = try await release.take(1, within: 60)
            for try await _ in resource.chunks {}
        }
        let endpoint = try endpoint(of: receiver)
        // The attacker: two connections from 127.0.0.1 with two peer IDs, two offers each.
        let first = try await rawSender(to: endpoint, from: "127.0.0.1", peerID: "claimed-1", serviceType: serviceType)
        let second = try await rawSender(to: endpoint, from: "127.0.0.1", peerID: "claimed-2", serviceType: serviceType)
        defer { first.close(); second.close() }
        let answers = [
            try await offer(1, on: first), try await offer(2, on: first),
            try await offer(3, on: second), try await offer(4, on: second),
        ]
        #expect(answers.prefix(3).allSatisfy { $0.contains("peerkit.resource.accept") }, "\(answers)")
        #expect(answers[3].contains("peerkit.resource.refuse") && answers[3].contains("it is already receiving 3 resources from this peer's address, its limit per address"), "the fourth offer from one address (two connections, two peer IDs) was answered: \(answers[3])")

        // Another host still gets the last of the 4 slots.
        let other = try await rawSender(to: endpoint, from: "127.0.0.2", peerID: "other", serviceType: serviceType)
        defer { other.close() }
        let answer = try await offer(1, on: other)
        #expect(answer.contains("peerkit.resource.accept"), "a sender from another address was answered \(answer) while one address held 3 of the 4 slots")
        for _ in 0..<4 { release.put(()) }
    }
}
