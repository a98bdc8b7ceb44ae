import ListrKit
import Logging
import PeerKit
import PeerKitTesting
import Testing

/// listrd's command handling (``ListrRequestHandler/serve(on:logger:)``, what listrd runs) driven
/// over a ``TestNetwork``: the real request path, wire format and replies, without processes,
/// ports or avahi-daemon.
@Suite("Listr commands over a test network", .serialized)
struct ListrOverTestNetworkTests {
    let persistence = InMemoryPersistence([Item(title: "Milk"), Item(title: "Bread"), Item(title: "Eggs")])

    /// A daemon serving the store, and a listrctl-like client connected to it.
    private func daemonAndClient(_ network: TestNetwork) async throws -> (client: PeerTransceiver, daemon: Peer) {
        let handler = ListrRequestHandler(store: try ItemStore(persistence: persistence), watchers: ListrWatchers { _, _ in })
        let daemon = try await network.startTransceiver(named: "listrd")
        handler.serve(on: daemon, logger: Logger(label: "listrd"))
        let client = try await network.startTransceiver(named: "listrctl") { $0.advertises = false }
        try await network.waitUntilConnected(daemon, client)
        return (client, try #require(client.connectedPeers.first))
    }

    @Test("given a store with three items, when listrctl's \"done 2\" arrives, then the reply names item 2 and the store has it done")
    func done2() async throws {
        let network = TestNetwork(serviceType: "listrctl")
        let (client, daemon) = try await given("listrd serving a store with three items, and listrctl connected") {
            try await daemonAndClient(network)
        }
        let reply = try await when("listrctl's \"done 2\" arrives") {
            try await client.request(CompleteItemCommand(index: 2), to: daemon, expecting: CLIResponse.self)
        }
        try await then("the reply names item 2, and the store has it done and saved") {
            #expect(reply == .message(#"Marked item 2, "Bread", as done."#))
            #expect(persistence.saved.map(\.title) == ["Milk", "Bread", "Eggs"])
            #expect(persistence.saved.map(\.done) == [false, true, false])
        }
        await network.shutdown()
    }

    @Test("given a store with three items, when listrctl's \"done 4\" arrives, then the reply is an error sentence and nothing changes")
    func doneOutOfRange() async throws {
        let network = TestNetwork(serviceType: "listrctl")
        let (client, daemon) = try await given("listrd serving a store with three items, and listrctl connected") {
            try await daemonAndClient(network)
        }
        let reply = try await when("listrctl's \"done 4\" arrives") {
            try await client.request(CompleteItemCommand(index: 4), to: daemon, expecting: CLIResponse.self)
        }
        try await then("the reply says why, and the store is unchanged") {
            guard case let .error(reason) = reply else {
                Issue.record("expected an error, got \(reply)")
                return
            }
            #expect(reason.contains("4"))
            #expect(persistence.saved.map(\.done) == [false, false, false])
        }
        await network.shutdown()
    }

    @Test("given a fake listrd that answers ListItemsCommand, when a client lists twice and adds, then the fake received the three commands in order, from the client")
    func fakeDaemon() async throws {
        let network = TestNetwork(serviceType: "listrctl")
        let fake = try await given("a fake listrd that answers ListItemsCommand with two items") {
            let fake = network.startFakePeer(named: "listrd")
            fake.answer(ListItemsCommand.self, with: CLIResponse.message("[ ] Milk\n[✓] Bread"))
            fake.answer(AddItemCommand.self) { command, sender in
                CLIResponse.message("Added \"\(command.title)\" for \(sender.name).")
            }
            return fake
        }
        let client = try await network.startTransceiver(named: "listrctl") { $0.advertises = false }
        try await network.eventually("the client connected to the fake") { client.connectedPeers.count == 1 }
        let daemon = try #require(client.connectedPeers.first)

        let replies = try await when("the client lists, lists a page, and adds an item") {
            [
                try await client.request(ListItemsCommand(), to: daemon, expecting: CLIResponse.self),
                try await client.request(ListItemsCommand(limit: 1, offset: 1), to: daemon, expecting: CLIResponse.self),
                try await client.request(AddItemCommand(title: "Tea"), to: daemon, expecting: CLIResponse.self),
            ]
        }
        try await then("the client got the scripted replies, and the fake received the three commands in order, from listrctl") {
            #expect(replies == [.message("[ ] Milk\n[✓] Bread"), .message("[ ] Milk\n[✓] Bread"), .message(#"Added "Tea" for listrctl."#)])
            #expect(fake.received.map(\.type) == ["ListItemsCommand", "ListItemsCommand", "AddItemCommand"])
            #expect(fake.received.allSatisfy { $0.sender.name == "listrctl" && $0.sender.peerID == client.peerID })
            let lists = try fake.received(ListItemsCommand.self)
            let adds = try fake.received(AddItemCommand.self)
            #expect(lists == [ListItemsCommand(), ListItemsCommand(limit: 1, offset: 1)])
            #expect(adds.map(\.title) == ["Tea"])
        }
        await network.shutdown()
    }
}
