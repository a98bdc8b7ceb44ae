import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import PeerKit

/// Waits until `events` has shown each "name in group" of `memberships` joining, in any order
/// (one stream is read once, so waiting for them one after another could skip an earlier one).
private func joined(_ events: AsyncStream<PeerEvent>, _ memberships: [String]) async throws {
    try await within(20, "\(memberships) to join") {
        var missing = Set(memberships)
        for await event in events {
            if case let .peerJoinedGroup(peer, group) = event { missing.remove("\(peer.name) in \(group)") }
            if missing.isEmpty { return }
        }
        throw TimedOut(what: "\(missing) to join (the event stream ended)")
    }
}

private func joined(_ events: AsyncStream<PeerEvent>, _ name: String, _ group: String) async throws {
    try await joined(events, ["\(name) in \(group)"])
}

private func left(_ events: AsyncStream<PeerEvent>, _ name: String, _ group: String) async throws {
    _ = try await nextEvent(events, "\(name) to leave \(group)") { event in
        if case let .peerLeftGroup(peer, leftGroup) = event { return peer.name == name && leftGroup == group }
        return false
    }
}

@Suite("Groups between transceivers over loopback TCP")
struct TransceiverGroupTests {
    @Test("a message sent to a group reaches its members only")
    func onlyMembersReceive() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 3)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        for spoke in spokes {
            spoke.receive(Note.self) { note, sender in inbox.put("\(spoke.configuration.peerName) got \(note.text) from \(sender.name)") }
        }
        let events = hub.events()
        try spokes[0].join("kitchen")
        try spokes[2].join("kitchen")
        try spokes[1].join("garden")
        try await joined(events, ["spoke0 in kitchen", "spoke2 in kitchen"])
        #expect(hub.peers(inGroup: "kitchen").map(\.name) == ["spoke0", "spoke2"])
        #expect(hub.groups.isEmpty, "the hub sends to a group it is not in")

        let reached = try await hub.send(Note(text: "dinner"), toGroup: "kitchen")
        #expect(reached.map(\.name) == ["spoke0", "spoke2"])
        // A broadcast after it: each spoke's messages arrive in order, so when the three
        // markers are in, anything the group message did is in too.
        hub.broadcast(Note(text: "marker"))
        let received = try await inbox.take(5)
        #expect(Set(received) == [
            "spoke0 got dinner from hub", "spoke2 got dinner from hub",
            "spoke0 got marker from hub", "spoke1 got marker from hub", "spoke2 got marker from hub",
        ])
        #expect(try await hub.send(Note(text: "nobody"), toGroup: "attic").isEmpty)
    }

    @Test("a peer that connects late learns the existing membership right after the handshake")
    func lateJoinerLearnsMembership() async throws {
        let serviceType = randomServiceType()
        let early = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "early"))
        // Joined before it even starts: membership belongs to the transceiver.
        try early.join("lights")
        try early.join("kitchen")
        try await early.start()
        defer { early.stop() }
        #expect(early.groups == ["kitchen", "lights"])

        let late = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "late", peers: [try endpoint(of: early)]))
        let lateEvents = late.events()
        let earlyEvents = early.events()
        try late.join("lights")
        try await late.start()
        defer { late.stop() }
        let seen = try await within(20, "the early peer's two groups") {
            var sequence: [String] = []
            for await event in lateEvents {
                switch event {
                case let .peerConnected(peer): sequence.append("connected \(peer.name)")
                case let .peerJoinedGroup(peer, group): sequence.append("\(peer.name) in \(group)")
                default: continue
                }
                if sequence.count == 3 { break }
            }
            return sequence
        }
        #expect(seen == ["connected early", "early in kitchen", "early in lights"])
        #expect(late.peers(inGroup: "kitchen").map(\.name) == ["early"])
        // And the other way round.
        try await joined(earlyEvents, "late", "lights")
        #expect(early.peers(inGroup: "lights").map(\.name) == ["late"])

        // A join after both are connected reaches the other at once.
        try late.join("kitchen")
        try await joined(earlyEvents, "late", "kitchen")
        #expect(early.peers(inGroup: "kitchen").map(\.name) == ["late"])
    }

    @Test("after a member leaves, messages to the group no longer reach it")
    func leaveStopsDelivery() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let inbox = Inbox<String>()
        for spoke in spokes {
            spoke.receive(Note.self) { note in inbox.put("\(spoke.configuration.peerName):\(note.text)") }
        }
        let events = hub.events()
        try spokes[0].join("g")
        try spokes[1].join("g")
        try await joined(events, ["spoke0 in g", "spoke1 in g"])
        try await hub.send(Note(text: "one"), toGroup: "g")
        #expect(Set(try await inbox.take(2)) == ["spoke0:one", "spoke1:one"])

        spokes[0].leave("g")
        #expect(spokes[0].groups.isEmpty)
        try await left(events, "spoke0", "g")
        #expect(hub.peers(inGroup: "g").map(\.name) == ["spoke1"])
        #expect(try await hub.send(Note(text: "two"), toGroup: "g").map(\.name) == ["spoke1"])
        hub.broadcast(Note(text: "marker"))
        let after = try await inbox.take(3)
        #expect(Set(after) == ["spoke1:two", "spoke0:marker", "spoke1:marker"])
    }

    @Test("a peer that disconnects leaves its groups, said before its disconnection")
    func disconnectRemovesMembership() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let events = hub.events()
        try spokes[0].join("a")
        try spokes[0].join("b")
        try spokes[1].join("a")
        try await joined(events, ["spoke0 in a", "spoke0 in b", "spoke1 in a"])
        await spokes[0].shutdown()
        let sequence = try await within(20, "spoke0 to leave and disconnect") {
            var sequence: [String] = []
            for await event in events {
                switch event {
                case let .peerLeftGroup(peer, group): sequence.append("\(peer.name) left \(group)")
                case let .peerDisconnected(peer, _): sequence.append("\(peer.name) disconnected")
                default: continue
                }
                if sequence.last == "spoke0 disconnected" { break }
            }
            return sequence
        }
        #expect(sequence == ["spoke0 left a", "spoke0 left b", "spoke0 disconnected"])
        #expect(hub.peers(inGroup: "a").map(\.name) == ["spoke1"])
        #expect(hub.peers(inGroup: "b").isEmpty)
    }

    @Test("a request to a group gathers every member's answer, failures included")
    func groupRequest() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 3)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let events = hub.events()
        spokes[0].respond(to: Question.self) { question, sender in Answer(text: question.text.uppercased(), from: sender.name) }
        spokes[2].respond(to: Question.self) { _, _ in Answer(text: "not a member", from: "spoke2") }
        try spokes[0].join("q")
        try spokes[1].join("q")
        try await joined(events, ["spoke0 in q", "spoke1 in q"])
        let replies = try await hub.request(Question(text: "status"), toGroup: "q", expecting: Answer.self, timeout: generousRequestTimeout)
        #expect(replies.map(\.peer.name) == ["spoke0", "spoke1"])
        #expect(try replies[0].result.get() == Answer(text: "STATUS", from: "hub"))
        #expect(throws: PeerKitError.remoteError(reason: "No handler for type Question.", peer: "spoke1")) { try replies[1].result.get() }
        #expect(try await hub.request(Question(text: "?"), toGroup: "empty", expecting: Answer.self, timeout: generousRequestTimeout).isEmpty)
    }

    @Test("a request to a group is answered on each member's event loop by an immediate responder")
    func groupRequestAnsweredImmediately() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let events = hub.events()
        let onLoop = NIOLockedValueBox<[String]>([])
        for spoke in spokes {
            spoke.respondImmediately(to: Question.self) { question, sender in
                if MultiThreadedEventLoopGroup.currentEventLoop != nil { onLoop.withLockedValue { $0.append(question.text) } }
                return Answer(text: question.text.uppercased(), from: sender.name)
            }
            try spoke.join("q")
        }
        try await joined(events, ["spoke0 in q", "spoke1 in q"])
        let replies = try await hub.request(Question(text: "status"), toGroup: "q", expecting: Answer.self, timeout: generousRequestTimeout)
        #expect(replies.map(\.peer.name) == ["spoke0", "spoke1"])
        #expect(try replies.map { try $0.result.get() } == [Answer(text: "STATUS", from: "hub"), Answer(text: "STATUS", from: "hub")])
        // Nothing was ahead of either request: both members answered where they read it.
        #expect(onLoop.withLockedValue { $0 } == ["status", "status"])
    }

    @Test("group names over the limits are refused locally with a sentence")
    func localLimits() throws {
        var configuration = loopbackConfiguration(serviceType: randomServiceType(), name: "limited")
        configuration.maximumGroupsPerPeer = 2
        configuration.maximumGroupNameLength = 8
        let transceiver = PeerTransceiver(configuration: configuration)
        #expect(throws: PeerKitError.invalidGroup("ninechars", reason: "is 9 bytes long, over the limit of 8 (PeerConfiguration.maximumGroupNameLength)")) {
            try transceiver.join("ninechars")
        }
        try transceiver.join("a")
        try transceiver.join("b")
        do {
            try transceiver.join("c")
            Issue.record("a third group was joined over a limit of 2")
        } catch {
            #expect(error.description == "The group \"c\" cannot be used: this transceiver is in 2 groups already, the limit (PeerConfiguration.maximumGroupsPerPeer), which its peers enforce too.")
        }
        #expect(transceiver.groups == ["a", "b"])
    }
}

@Suite("Groups against raw peers: old peers, the snapshot after the hello, limits")
struct GroupWireTests {
    /// A started transceiver in group "g", and a raw peer connected to it that said hello.
    private func rawPeerAgainst(features: [String]?, name: String, log: CapturedLog? = nil) async throws -> (PeerTransceiver, RawPeer, String) {
        let serviceType = randomServiceType()
        var configuration = loopbackConfiguration(serviceType: serviceType, name: name)
        // A raw peer answers no pings: with the default 2.5 s timeout, a test stalled that long
        // on a loaded machine would lose it to the heartbeat, which is not what these tests are about.
        configuration.heartbeatInterval = .seconds(10)
        configuration.peerTimeout = .seconds(60)
        // Nor to the handshake timeout: under load, a test's task can wait more than the default
        // 5 s between connecting a raw peer and sending its hello (overTheLimit's second peer did).
        configuration.handshakeTimeout = .seconds(60)
        if let log { configuration.logger = log.logger }
        let transceiver = PeerTransceiver(configuration: configuration)
        try transceiver.join("g")
        try await transceiver.start()
        let raw = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        try await raw.sayHello(serviceType: serviceType, peerID: "raw-peer", name: "raw", features: features)
        return (transceiver, raw, serviceType)
    }

    @Test("an old peer (no features in its hello) is sent no group frames, is in no group, and exchanges ordinary messages")
    func oldPeer() async throws {
        let (transceiver, raw, _) = try await rawPeerAgainst(features: nil, name: "modern")
        defer { transceiver.stop(); raw.close() }
        let inbox = Inbox<Note>()
        transceiver.receive(Note.self) { note in inbox.put(note) }

        // The new side's hello lists the feature; the old side simply ignores the key.
        let hello = try #require(await raw.nextFrame())
        #expect(hello.contains(#""features":["groups","resources","resume"]"#), "the hello was \(hello)")
        let peer = try await within(20, "the raw peer to connect") {
            while true {
                if let peer = transceiver.connectedPeers.first { return peer }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        // Membership changes meanwhile; then an ordinary message. Frames on one connection
        // keep their order, so a group frame sent to the old peer would arrive before the note.
        try transceiver.join("h")
        transceiver.leave("g")
        try await transceiver.send(Note(text: "to the old peer"), to: [peer])
        var before: [String] = []
        while let frame = await raw.nextFrame() {
            if frame.contains(#""type":"Note""#) {
                #expect(frame.contains("to the old peer"))
                break
            }
            before.append(frame)
        }
        #expect(before.isEmpty, "the old peer was sent \(before) before the note")

        // It is a member of no group: a group send does not reach it.
        #expect(transceiver.peers(inGroup: "g").isEmpty && transceiver.peers(inGroup: "h").isEmpty)
        #expect(try await transceiver.send(Note(text: "group only"), toGroup: "h").isEmpty)
        // And the other way: its ordinary message is delivered.
        try await raw.send(#"{"type":"Note","payload":{"text":"from the old peer"}}"#)
        #expect(try await inbox.take(1) == [Note(text: "from the old peer")])
        #expect(!transceiver.connectedPeers.isEmpty)
    }

    @Test("a peer that lists the feature gets the membership snapshot right after the hello, and every change")
    func snapshotAfterHello() async throws {
        let (transceiver, raw, _) = try await rawPeerAgainst(features: ["groups"], name: "modern")
        defer { transceiver.stop(); raw.close() }
        let hello = try #require(await raw.nextFrame())
        #expect(hello.hasPrefix(#"{"type":"peerkit.hello""#))
        #expect(await raw.nextFrame() == #"{"type":"peerkit.groups","payload":{"version":1,"groups":["g"]}}"#)
        try transceiver.join("h")
        #expect(await raw.nextFrame() == #"{"type":"peerkit.groups","payload":{"version":2,"groups":["g","h"]}}"#)
        transceiver.leave("g")
        #expect(await raw.nextFrame() == #"{"type":"peerkit.groups","payload":{"version":3,"groups":["h"]}}"#)
    }

    @Test("a raw peer's snapshot makes it a member; a group message for a group the receiver is not in is dropped")
    func rawMemberAndReceiverFilter() async throws {
        let (transceiver, raw, _) = try await rawPeerAgainst(features: ["groups"], name: "modern")
        defer { transceiver.stop(); raw.close() }
        let events = transceiver.events()
        let inbox = Inbox<String>()
        transceiver.receive(Note.self) { note in inbox.put(note.text) }
        try await raw.send(#"{"type":"peerkit.groups","payload":{"version":5,"groups":["g","x"]}}"#)
        try await joined(events, "raw", "x")
        #expect(transceiver.peers(inGroup: "g").map(\.name) == ["raw"])
        // The transceiver is in "g", not in "x".
        try await raw.send(#"{"type":"Note","group":"x","payload":{"text":"to x"}}"#)
        try await raw.send(#"{"type":"Note","group":"g","payload":{"text":"to g"}}"#)
        try await raw.send(#"{"type":"Note","payload":{"text":"direct"}}"#)
        #expect(try await inbox.take(2) == ["to g", "direct"])
        // A request to a group it is not in is answered with an error, not left to time out.
        try await raw.send(#"{"type":"Note","id":"r1","group":"x","payload":{"text":"asking x"}}"#)
        var answer: String?
        while let frame = await raw.nextFrame(skipping: [#"{"type":"peerkit.ping""#, #"{"type":"peerkit.hello""#, #"{"type":"peerkit.groups""#]) {
            answer = frame
            break
        }
        #expect(answer == #"{"type":"peerkit.error","replyTo":"r1","payload":{"reason":"This peer is not in group \"x\"."}}"#)
    }

    @Test("a peer that announces more groups than the limit is disconnected with a sentence; others go on")
    func overTheLimit() async throws {
        let log = CapturedLog()
        let (transceiver, raw, serviceType) = try await rawPeerAgainst(features: ["groups"], name: "strict", log: log)
        defer { transceiver.stop(); raw.close() }
        let well = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        defer { well.close() }
        try await well.sayHello(serviceType: serviceType, peerID: "well-behaved", name: "well", features: ["groups"])
        let events = transceiver.events()
        let many = (0..<65).map { "\"g\($0)\"" }.joined(separator: ",")
        try await raw.send(#"{"type":"peerkit.groups","payload":{"version":1,"groups":[\#(many)]}}"#)
        var refusal: String?
        while let frame = await raw.nextFrame(skipping: [#"{"type":"peerkit.ping""#, #"{"type":"peerkit.hello""#, #"{"type":"peerkit.groups""#]) {
            refusal = frame
        }
        #expect(refusal == #"{"type":"peerkit.error","payload":{"reason":"Closing the connection: its peerkit.groups lists 65 groups, over the limit of 64 (PeerConfiguration.maximumGroupsPerPeer)."}}"#)
        #expect(await log.waitForMessage(containing: "went over a limit and was disconnected: its peerkit.groups lists 65 groups"))
        // The well-behaved peer stays and takes part.
        try await well.send(#"{"type":"peerkit.groups","payload":{"version":1,"groups":["g"]}}"#)
        try await joined(events, "well", "g")
        #expect(transceiver.peers(inGroup: "g").map(\.name) == ["well"])
        // A malformed snapshot is a protocol violation too.
        try await well.send(#"{"type":"peerkit.groups","payload":{"groups":"g"}}"#)
        var last: String?
        while let frame = await well.nextFrame(skipping: [#"{"type":"peerkit.ping""#, #"{"type":"peerkit.hello""#, #"{"type":"peerkit.groups""#]) {
            last = frame
        }
        #expect(last?.contains("a peerkit.groups payload is not") == true, "the malformed snapshot was answered with \(last ?? "nothing")")
    }
}
