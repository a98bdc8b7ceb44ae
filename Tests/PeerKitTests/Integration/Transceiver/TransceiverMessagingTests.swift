import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import PeerKit

struct Note: Codable, Sendable, Equatable { var text: String }
struct Numbered: Codable, Sendable { var n: Int }
struct Question: Codable, Sendable { var text: String }
struct Answer: Codable, Sendable, Equatable { var text: String; var from: String }

/// A hub transceiver and `count` spokes that dial it, all connected. A `peerTimeout` replaces
/// the default on all of them.
func connectedStar(spokes count: Int, serviceType: String = randomServiceType(), peerTimeout: Duration? = nil) async throws -> (hub: PeerTransceiver, spokes: [PeerTransceiver]) {
    func configuration(name: String, peers: [PeerEndpoint] = []) -> PeerConfiguration {
        var configuration = loopbackConfiguration(serviceType: serviceType, name: name, peers: peers)
        if let peerTimeout { configuration.peerTimeout = peerTimeout }
        return configuration
    }
    let hub = PeerTransceiver(configuration: configuration(name: "hub"))
    try await hub.start()
    let hubEndpoint = try endpoint(of: hub)
    var spokes: [PeerTransceiver] = []
    for index in 0..<count {
        let spoke = PeerTransceiver(configuration: configuration(name: "spoke\(index)", peers: [hubEndpoint]))
        try await spoke.start()
        _ = try await spoke.waitForPeer(timeout: .seconds(20))
        spokes.append(spoke)
    }
    let expected = count
    try await within(20, "the hub to see \(count) spokes") {
        while hub.connectedPeers.count < expected { try await Task.sleep(for: .milliseconds(10)) }
    }
    return (hub, spokes)
}

/// `count` questions ("q0", "q1", …) that `asker` asks `peer` at once, each answer by its question's index.
func askAtOnce(_ asker: PeerTransceiver, _ peer: Peer, count: Int = 50) async throws -> [Int: Answer] {
    try await withThrowingTaskGroup(of: (Int, Answer).self) { group in
        for index in 0..<count {
            group.addTask { (index, try await asker.request(Question(text: "q\(index)"), to: peer, expecting: Answer.self, timeout: generousRequestTimeout)) }
        }
        return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
    }
}

@Suite("Transceiver messaging over loopback TCP")
struct TransceiverMessagingTests {
    @Test("a broadcast reaches every connected peer, once, with the sender taken from the connection")
    func broadcast() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 3)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        for spoke in spokes {
            spoke.receive(Note.self) { note, sender in
                inbox.put("\(spoke.configuration.peerName) got \(note.text) from \(sender.name)")
            }
        }
        hub.broadcast(Note(text: "hello"))
        let received = try await inbox.take(3)
        #expect(Set(received) == ["spoke0 got hello from hub", "spoke1 got hello from hub", "spoke2 got hello from hub"])
    }

    @Test("the README snippet's shape works: receive with a one-argument closure, broadcast a value")
    func readmeShape() async throws {
        let serviceType = randomServiceType()
        let other = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "other"))
        try await other.start()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: "snippet", peers: [try endpoint(of: other)])
        configuration.advertises = false
        let transceiver = PeerTransceiver(configuration: configuration)
        defer { transceiver.stop(); other.stop() }

        struct SomeCodableThing: Codable { let text: String }
        transceiver.resume()
        let inbox = Inbox<String>()
        other.receive(SomeCodableThing.self) { payload in
            inbox.put(payload.text)
        }
        _ = try await transceiver.waitForPeer(timeout: .seconds(20))
        transceiver.broadcast(SomeCodableThing(text: "hello"))
        #expect(try await inbox.take(1) == ["hello"])
    }

    @Test("send reaches only the peers it names")
    func sendToOne() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        for spoke in spokes {
            spoke.receive(Note.self) { note in inbox.put("\(spoke.configuration.peerName):\(note.text)") }
        }
        let target = try #require(hub.connectedPeers.first { $0.name == "spoke1" })
        try await hub.send(Note(text: "only you"), to: [target])
        try await hub.send(Note(text: "marker"), to: hub.connectedPeers)
        let received = try await inbox.take(3)
        #expect(received.filter { $0.hasPrefix("spoke0") } == ["spoke0:marker"])
        #expect(received.filter { $0.hasPrefix("spoke1") } == ["spoke1:only you", "spoke1:marker"])
    }

    @Test("a request gets its reply from the responder, to the requester only")
    func requestReply() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        hub.respond(to: Question.self) { question, sender in
            Answer(text: question.text.uppercased(), from: sender.name)
        }
        let stray = Inbox<Answer>()
        spokes[1].receive(Answer.self) { answer in stray.put(answer) }
        let hubPeer = try #require(spokes[0].connectedPeers.first)
        let answer = try await spokes[0].request(Question(text: "ping"), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout)
        #expect(answer == Answer(text: "PING", from: "spoke0"))
        // Many requests at once are each matched to their own reply.
        let answers = try await askAtOnce(spokes[0], hubPeer)
        #expect(answers.count == 50)
        #expect(answers.allSatisfy { $0.value.text == "Q\($0.key)" })
        // The other spoke saw none of the replies: a broadcast marker arrives first and alone.
        hub.broadcast(Answer(text: "marker", from: "hub"))
        #expect(try await stray.take(1) == [Answer(text: "marker", from: "hub")])
    }

    @Test("a request to a type with no handler fails with the peer's sentence, and the connection stays open")
    func noHandler() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let hubPeer = try #require(spokes[0].connectedPeers.first)
        await #expect(throws: PeerKitError.remoteError(reason: "No handler for type Question.", peer: "hub")) {
            _ = try await spokes[0].request(Question(text: "?"), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout)
        }
        hub.respond(to: Question.self) { question, _ in Answer(text: "now", from: "hub") }
        #expect(try await spokes[0].request(Question(text: "?"), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout).text == "now")
    }

    @Test("a request whose responder throws fails with the thrown error's description")
    func responderThrows() async throws {
        struct Refusal: Error, CustomStringConvertible { var description: String { "The store is read-only." } }
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        hub.respond(to: Question.self) { _, _ -> Answer in throw Refusal() }
        let hubPeer = try #require(spokes[0].connectedPeers.first)
        await #expect(throws: PeerKitError.remoteError(reason: "The store is read-only.", peer: "hub")) {
            _ = try await spokes[0].request(Question(text: "?"), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout)
        }
    }

    @Test("registering a type again replaces its handler")
    func handlerReplaced() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        hub.receive(Note.self) { note in inbox.put("first:\(note.text)") }
        hub.receive(Note.self) { note in inbox.put("second:\(note.text)") }
        try await spokes[0].send(Note(text: "a"), to: spokes[0].connectedPeers)
        #expect(try await inbox.take(1) == ["second:a"])
        hub.stopReceiving(Note.self)
        hub.receive(Note.self) { note, sender in inbox.put("third:\(note.text):\(sender.name)") }
        try await spokes[0].send(Note(text: "b"), to: spokes[0].connectedPeers)
        #expect(try await inbox.take(1) == ["third:b:spoke0"])
    }

    @Test("handlers run one at a time, in the order messages arrived")
    func serialHandlers() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inFlight = NIOLockedValueBox(0)
        let maximum = NIOLockedValueBox(0)
        let inbox = Inbox<Int>()
        hub.receive(Numbered.self) { message in
            let now = inFlight.withLockedValue { $0 += 1; return $0 }
            maximum.withLockedValue { $0 = max($0, now) }
            await Task.yield()
            inFlight.withLockedValue { $0 -= 1 }
            inbox.put(message.n)
        }
        for n in 0..<500 { spokes[0].broadcast(Numbered(n: n)) }
        #expect(try await inbox.take(500) == Array(0..<500))
        #expect(maximum.withLockedValue { $0 } == 1)
    }

    @Test("a custom wire key lets two types of the same name coexist")
    func customWireKeys() async throws {
        enum ModuleA { struct Command: Codable, PeerMessage { static var messageType: String { "a.Command" }; var value: Int } }
        enum ModuleB { struct Command: Codable, PeerMessage { static var messageType: String { "b.Command" }; var value: Int } }
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        hub.receive(ModuleA.Command.self) { command in inbox.put("A\(command.value)") }
        hub.receive(ModuleB.Command.self) { command in inbox.put("B\(command.value)") }
        spokes[0].broadcast(ModuleB.Command(value: 2))
        spokes[0].broadcast(ModuleA.Command(value: 1))
        #expect(try await inbox.take(2) == ["B2", "A1"])
    }

    @Test("sending to a peer that is not connected throws and sends nothing")
    func sendToDisconnected() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        spokes[0].receive(Note.self) { note in inbox.put(note.text) }
        let ghost = Peer(id: "ghost", name: "Ghost", isConnected: false)
        await #expect(throws: PeerKitError.peerNotConnected(peer: "Ghost")) {
            try await hub.send(Note(text: "to both"), to: hub.connectedPeers + [ghost])
        }
        await #expect(throws: PeerKitError.peerNotConnected(peer: "Ghost")) {
            try await hub.send(Note(text: "to the ghost"), to: [ghost])
        }
        await #expect(throws: PeerKitError.peerNotConnected(peer: "Ghost")) {
            try await hub.send(RawPeerMessage(type: "Note", json: #"{"text":"raw"}"#), to: [ghost])
        }
        // Messages of one peer arrive in order: the first to arrive is the one sent after.
        try await hub.send(Note(text: "to the spoke"), to: hub.connectedPeers)
        #expect(try await inbox.take(1) == ["to the spoke"])
    }

    @Test("a payload that does not encode, sent to one peer, names a peer that is not connected first, else itself")
    func sendUnencodable() async throws {
        struct Refuses: Encodable {
            struct Refusal: Error {}
            func encode(to encoder: any Encoder) throws { throw Refusal() }
        }
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let ghost = Peer(id: "ghost", name: "Ghost", isConnected: false)
        await #expect(throws: PeerKitError.peerNotConnected(peer: "Ghost")) {
            try await hub.send(Refuses(), to: [ghost])
        }
        let error = await #expect(throws: PeerKitError.self) {
            try await hub.send(Refuses(), to: hub.connectedPeers)
        }
        #expect(error?.code == .encodingFailed)
    }

    @Test("a request too large for the responder fails with the responder's reason, not just a closed connection")
    func oversizedRequest() async throws {
        let serviceType = randomServiceType()
        var hubConfiguration = loopbackConfiguration(serviceType: serviceType, name: "hub")
        hubConfiguration.maximumFrameLength = 1024
        let hub = PeerTransceiver(configuration: hubConfiguration)
        try await hub.start()
        defer { hub.stop() }
        hub.respond(to: Question.self) { question, _ in Answer(text: "ok", from: "hub") }
        let spoke = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "spoke", peers: [try endpoint(of: hub)]))
        try await spoke.start()
        defer { spoke.stop() }
        let hubPeer = try await spoke.waitForPeer(timeout: .seconds(20))
        let error = await #expect(throws: PeerKitError.self) {
            _ = try await spoke.request(Question(text: String(repeating: "x", count: 2000)), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout)
        }
        guard let error, error.code == .remoteError, let reason = error.reason else {
            Issue.record("expected the hub's reason, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("Closing the connection: a frame of "))
        #expect(reason.hasSuffix(" bytes exceeds the 1024-byte limit."))
    }
}

@Suite("Transceiver edges")
struct TransceiverEdgeTests {
    @Test("a broadcast right after resume() is not an error (the README snippet)")
    func broadcastAfterResume() async throws {
        let transceiver = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "snippet"))
        let events = transceiver.events()
        transceiver.resume()
        transceiver.broadcast(Note(text: "hello"))
        let first = try await nextEvent(events, "the transceiver to start or fail") { event in
            switch event {
            case .started, .error: return true
            default: return false
            }
        }
        #expect(first == .started(port: transceiver.listeningPort ?? -1))
        transceiver.stop()
    }

    @Test("a local peer name over 63 bytes fails with a sentence giving the limit")
    func longPeerName() async {
        var configuration = loopbackConfiguration(serviceType: randomServiceType(), name: String(repeating: "n", count: 64))
        configuration.discovery = .none
        let transceiver = PeerTransceiver(configuration: configuration)
        do {
            try await transceiver.start()
            Issue.record("start() should have thrown")
        } catch {
            let description = String(describing: error)
            #expect(description.contains("it is 64 bytes long in UTF-8, and a DNS-SD instance name is at most 63"))
        }
    }

    @Test("a peer renamed after connecting is shown under its new name by peers already connected")
    func renamePropagates() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let events = spokes[0].events()
        // As Avahi reports after a name collision renamed the hub.
        try #require(hub.session).manager.handle(.advertised(name: "hub #2"))
        _ = try await nextEvent(events, "the spoke to see the new name") { event in
            if case let .availablePeersChanged(peers) = event { return peers.map(\.name) == ["hub #2"] }
            return false
        }
        #expect(spokes[0].connectedPeers.map(\.name) == ["hub #2"])
    }

    @Test("a port that is taken gives a sentence naming the address and the errno")
    func listenFailure() async throws {
        let first = PeerTransceiver(configuration: loopbackConfiguration(serviceType: randomServiceType(), name: "first"))
        try await first.start()
        defer { first.stop() }
        var configuration = loopbackConfiguration(serviceType: randomServiceType(), name: "second")
        configuration.listenPort = try #require(first.listeningPort)
        let second = PeerTransceiver(configuration: configuration)
        do {
            try await second.start()
            Issue.record("start() should have thrown")
        } catch {
            let text = String(describing: error)
            #expect(text.contains("127.0.0.1:\(configuration.listenPort)"))
            #expect(text.contains("(errno: 98)"))
        }
    }
}
