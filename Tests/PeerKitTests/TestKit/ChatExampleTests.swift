import PeerKit
import PeerKitTesting
import Synchronization
import Testing

/// A line of a two-peer chat: the app's only message.
struct ChatLine: Codable, Sendable, Equatable {
    var text: String
}

/// What a peer received, "sender: text", in order.
final class ChatInbox: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var received: [String] { lines.withLock { $0 } }
}

@Suite("A two-peer chat, on a test network")
struct ChatExampleTests {
    @Test("a line alice sends reaches bob with alice as its sender; a line sent while the link is broken arrives once it heals")
    func chat() async throws {
        let network = TestNetwork()
        let inbox = ChatInbox()

        let (alice, bob) = try await given("alice and bob, connected; bob keeps an inbox") {
            let alice = try await network.startTransceiver(named: "alice")
            let bob = try await network.startTransceiver(named: "bob")
            bob.receive(ChatLine.self) { line, sender in inbox.append("\(sender.name): \(line.text)") }
            try await network.waitUntilConnected(alice, bob)
            return (alice, bob)
        }

        try await when("alice sends a line to bob") {
            try await alice.send(ChatLine(text: "hello, bob"), to: alice.connectedPeers)
        }

        try await then("bob's inbox holds the line, from alice") {
            try await network.eventually("bob received a line") { inbox.received.count == 1 }
            #expect(inbox.received == ["alice: hello, bob"])
        }

        try await when("the link between them breaks, 5 s pass (twice the peer timeout), and alice sends another line") {
            network.partition(alice, bob)
            await network.advance(by: .seconds(5))
            // Bob is suspended, not gone: his session keeps what alice sends for him.
            try await alice.send(ChatLine(text: "are you there?"), to: alice.connectedPeers)
        }

        try await then("once the link heals, bob gets the line, once, after the first") {
            network.heal(alice, bob)
            await network.advance(by: .seconds(5))
            try await network.eventually("bob received the second line") { inbox.received.count == 2 }
            #expect(inbox.received == ["alice: hello, bob", "alice: are you there?"])
        }
        await network.shutdown()
    }
}
