import NIOConcurrencyHelpers
import PeerKit
import PeerKitTesting
import Testing

/// A numbered message for the resume tests.
struct SessionNumber: Codable, Sendable { var n: Int }
/// A request and its reply for the resume tests.
struct SessionQuestion: Codable, Sendable { var n: Int }
struct SessionAnswer: Codable, Sendable { var n: Int }

extension TestNetworkSuites {
/// Resumable sessions (feature resume) on a test network: real transceivers, a link cut for
/// longer than the peer timeout, time on the network's clock.
@Suite("Resumable sessions on a test network")
struct SessionResumeTests {
    /// Alice and bob with sessions on, each recording the numbers it receives and answering questions.
    /// `configureBob`, when given, replaces `configure` for bob.
    func pair(_ network: TestNetwork, configure: @escaping (inout PeerConfiguration) -> Void = { _ in },
              configureBob: ((inout PeerConfiguration) -> Void)? = nil) async throws
        -> (alice: PeerTransceiver, bob: PeerTransceiver, atAlice: NIOLockedValueBox<[Int]>, atBob: NIOLockedValueBox<[Int]>) {
        func setup(_ configure: @escaping (inout PeerConfiguration) -> Void) -> (inout PeerConfiguration) -> Void {
            { configuration in
                configuration.resumesSessions = true
                configure(&configuration)
            }
        }
        let alice = try await network.startTransceiver(named: "alice", configure: setup(configure))
        let bob = try await network.startTransceiver(named: "bob", configure: setup(configureBob ?? configure))
        let atAlice = NIOLockedValueBox<[Int]>([])
        let atBob = NIOLockedValueBox<[Int]>([])
        alice.receive(SessionNumber.self) { message in atAlice.withLockedValue { $0.append(message.n) } }
        bob.receive(SessionNumber.self) { message in atBob.withLockedValue { $0.append(message.n) } }
        alice.respond(to: SessionQuestion.self) { question, _ in SessionAnswer(n: question.n) }
        bob.respond(to: SessionQuestion.self) { question, _ in SessionAnswer(n: question.n) }
        try await network.waitUntilConnected(alice, bob)
        return (alice, bob, atAlice, atBob)
    }

    @Test("with sessions on, messages go both ways in order")
    func plain() async throws {
        let network = TestNetwork()
        let (alice, bob, atAlice, atBob) = try await pair(network)
        let toBob = try #require(alice.connectedPeers.first)
        let toAlice = try #require(bob.connectedPeers.first)
        for n in 0..<100 {
            try await alice.send(SessionNumber(n: n), to: [toBob])
            try await bob.send(SessionNumber(n: n), to: [toAlice])
        }
        try await network.eventually("both received 100") { atAlice.withLockedValue { $0.count } == 100 && atBob.withLockedValue { $0.count } == 100 }
        #expect(atBob.withLockedValue { $0 } == Array(0..<100))
        #expect(atAlice.withLockedValue { $0 } == Array(0..<100))
        await network.shutdown()
    }

    /// Sends `range` from `from` to `to` as numbered messages, and starts a request for every
    /// hundredth number, whose answers land in `answers`.
    func stream(_ range: Range<Int>, from: PeerTransceiver, to peer: Peer, answers: NIOLockedValueBox<[Int]>, requests: inout [Task<Void, any Error>]) async throws {
        for n in range {
            try await from.send(SessionNumber(n: n), to: [peer])
            if n % 100 == 0 {
                requests.append(Task.immediate {
                    let answer = try await from.request(SessionQuestion(n: n), to: peer, expecting: SessionAnswer.self, timeout: .seconds(120))
                    answers.withLockedValue { $0.append(answer.n) }
                })
            }
        }
    }

    @Test("a link cut for longer than the peer timeout in the middle of 10,000 messages and 100 requests each way loses, duplicates and reorders nothing, and nobody is reported disconnected")
    func cutMidStream() async throws {
        let network = TestNetwork()
        let (alice, bob, atAlice, atBob) = try await pair(network)
        let aliceEvents = EventRecorder(alice, on: network)
        let bobEvents = EventRecorder(bob, on: network)
        let toBob = try #require(alice.connectedPeers.first)
        let toAlice = try #require(bob.connectedPeers.first)
        let answersAtAlice = NIOLockedValueBox<[Int]>([])
        let answersAtBob = NIOLockedValueBox<[Int]>([])
        var requests: [Task<Void, any Error>] = []

        try await stream(0..<5000, from: alice, to: toBob, answers: answersAtAlice, requests: &requests)
        try await stream(0..<5000, from: bob, to: toAlice, answers: answersAtBob, requests: &requests)
        network.partition(alice, bob)
        try await stream(5000..<10000, from: alice, to: toBob, answers: answersAtAlice, requests: &requests)
        try await stream(5000..<10000, from: bob, to: toAlice, answers: answersAtBob, requests: &requests)
        // Longer than the peer timeout (2.5 s): both connections are declared dead.
        await network.advance(by: .seconds(5))
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "alice keeps bob, suspended")
        #expect(bob.connectedPeers.map(\.name) == ["alice"], "bob keeps alice, suspended")
        network.heal(alice, bob)
        await network.advance(by: .seconds(5))
        try await network.eventually("every message arrived") {
            atAlice.withLockedValue { $0.count } >= 10000 && atBob.withLockedValue { $0.count } >= 10000
        }
        for request in requests { try await request.value }
        #expect(atBob.withLockedValue { $0 } == Array(0..<10000))
        #expect(atAlice.withLockedValue { $0 } == Array(0..<10000))
        #expect(answersAtAlice.withLockedValue { $0 }.sorted() == Array(stride(from: 0, to: 10000, by: 100)))
        #expect(answersAtBob.withLockedValue { $0 }.sorted() == Array(stride(from: 0, to: 10000, by: 100)))
        let disconnections = (aliceEvents.events + bobEvents.events).filter { if case .peerDisconnected = $0 { true } else { false } }
        #expect(disconnections.isEmpty, "\(disconnections)")
        for events in [aliceEvents.events, bobEvents.events] {
            #expect(events.contains { if case .peerSuspended = $0 { true } else { false } })
            #expect(events.contains { if case .peerResumed = $0 { true } else { false } })
        }
        await network.shutdown()
    }

    /// Starts `request`, moves the network's clock on by `advance`, and returns what it threw.
    func failure(of request: @escaping @Sendable () async throws -> SessionAnswer, after advance: Duration, on network: TestNetwork) async -> PeerKitError? {
        let task = Task.immediate { try await request() }
        await network.advance(by: advance)
        return await #expect(throws: PeerKitError.self) { try await task.value }
    }

    @Test("a request that times out while the peer's connection is down says so, and one to a peer that is connected does not")
    func requestTimedOutWhileDown() async throws {
        let network = TestNetwork()
        let (alice, bob, _, _) = try await pair(network)
        let toBob = try #require(alice.connectedPeers.first)
        // A question bob takes 3 s to answer, while connected: only the time ran out.
        struct SlowQuestion: Codable, Sendable { var n: Int }
        bob.respond(to: SlowQuestion.self) { question, _ in
            try await network.clock.sleep(for: .seconds(3))
            return SessionAnswer(n: question.n)
        }
        let slow = await failure(of: {
            try await alice.request(SlowQuestion(n: 1), to: toBob, expecting: SessionAnswer.self, timeout: .seconds(1))
        }, after: .seconds(2), on: network)
        #expect(slow?.code == .requestTimedOut)
        #expect(slow?.description == "bob did not answer the SlowQuestion request within 1 s.", "\(String(describing: slow))")

        // The link is cut: alice's heartbeat gives up on it after the peer timeout (2.5 s), and her
        // session waits for bob to come back; the request times out first.
        network.partition(alice, bob)
        let down = await failure(of: {
            try await alice.request(SessionQuestion(n: 2), to: toBob, expecting: SessionAnswer.self, timeout: .seconds(3.5))
        }, after: .seconds(4), on: network)
        #expect(down?.code == .requestTimedOut)
        #expect(down?.description == "bob did not answer the SessionQuestion request within 3.5 s: its connection is down, and it has not reconnected since it was lost. Check that it is still running and reachable.", "\(String(describing: down))")
        await network.shutdown()
    }

    @Test("when alice's address changes, bob takes her new connection over the old one, which still hears her, and what she sends arrives at once, not when the old one has closed; nothing is lost, duplicated or reordered")
    func addressChange() async throws {
        let network = TestNetwork()
        let (alice, bob, _, atBob) = try await pair(network)
        let aliceEvents = EventRecorder(alice, on: network)
        let bobEvents = EventRecorder(bob, on: network)
        let toBob = try #require(alice.connectedPeers.first)
        network.changeAddress(of: alice)
        // Alice keeps sending: what she writes on her old connection arrives, so bob's end of it
        // stays loud, while nothing reaches her and her heartbeat gives up on it. She then dials
        // bob from her new address and resumes; bob keeps the new connection (the old one is
        // older) and reads the old one until her bye, which never comes, or until nothing has
        // arrived on it for a heartbeat interval (TieBreakOnTestNetworkTests.addressChangeWithoutSessions).
        let resumed: @Sendable (PeerEvent) -> Bool = { if case .peerResumed = $0 { true } else { false } }
        var sent = 0
        while !aliceEvents.events.contains(where: resumed), network.elapsed < .seconds(20) {
            try await alice.send(SessionNumber(n: sent), to: [toBob])
            sent += 1
            await network.advance(by: .milliseconds(100))
        }
        try #require(aliceEvents.events.contains(where: resumed), "alice resumed her session with bob on a new connection")
        for _ in 0..<10 {
            try await alice.send(SessionNumber(n: sent), to: [toBob])
            sent += 1
        }
        // Without advancing the clock: nothing waits for the old connection to close.
        let total = sent
        try await network.eventually("bob received all \(total) messages") { atBob.withLockedValue { $0.count } >= total }
        #expect(atBob.withLockedValue { $0 } == Array(0..<total))
        #expect(aliceEvents.events.contains { if case .peerSuspended = $0 { true } else { false } })
        let interruptions = bobEvents.events.filter {
            switch $0 {
            case .peerSuspended, .peerDisconnected: true
            default: false
            }
        }
        #expect(interruptions.isEmpty, "bob never lost alice: \(interruptions)")
        #expect(!aliceEvents.events.contains { if case .peerDisconnected = $0 { true } else { false } })
        await network.shutdown()
    }

    @Test("a gap longer than the resume window disconnects the peer with sessionExpired; a request waiting on it and later sends throw it")
    func windowExpires() async throws {
        let network = TestNetwork()
        let (alice, bob, _, _) = try await pair(network) { $0.sessionResumeWindow = .seconds(6) }
        let aliceEvents = EventRecorder(alice, on: network)
        let toBob = try #require(alice.connectedPeers.first)
        network.partition(alice, bob)
        let request = Task.immediate {
            try await alice.request(SessionQuestion(n: 1), to: toBob, expecting: SessionAnswer.self, timeout: .seconds(60))
        }
        await network.advance(by: .seconds(4))
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "suspended within the window")
        await network.advance(by: .seconds(6))
        let failure = await #expect(throws: PeerKitError.self) { try await request.value }
        #expect(failure?.code == .sessionExpired)
        #expect(failure?.description.contains("6 s resume window (PeerConfiguration.sessionResumeWindow)") == true, "\(String(describing: failure))")
        #expect(alice.connectedPeers.isEmpty)
        let reasons = aliceEvents.events.compactMap { event -> PeerKitError? in
            if case let .peerDisconnected(_, reason) = event { return reason }
            return nil
        }
        #expect(reasons.map(\.code) == [.sessionExpired])
        let late = await #expect(throws: PeerKitError.self) { try await alice.send(SessionNumber(n: 2), to: [toBob]) }
        #expect(late?.code == .sessionExpired)
        await network.shutdown()
    }

    @Test("sends to a suspended peer beyond maximumUnacknowledgedBytes throw sessionBufferFull, and the peer is disconnected with it")
    func bufferFull() async throws {
        let network = TestNetwork()
        let (alice, bob, _, _) = try await pair(network) { $0.maximumUnacknowledgedBytes = 4096 }
        let aliceEvents = EventRecorder(alice, on: network)
        let toBob = try #require(alice.connectedPeers.first)
        network.partition(alice, bob)
        await network.advance(by: .seconds(4))
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "suspended")
        var sent = 0
        var failure: PeerKitError?
        while failure == nil, sent < 1000 {
            do {
                try await alice.send(SessionNumber(n: sent), to: [toBob])
                sent += 1
            } catch let error as PeerKitError {
                failure = error
            }
        }
        #expect(failure?.code == .sessionBufferFull)
        #expect(failure?.description.contains("at the 4096-byte limit (PeerConfiguration.maximumUnacknowledgedBytes)") == true, "\(String(describing: failure))")
        // Each frame counts its bytes and 256 more (PeerConnection.perFrameOverhead): 4096 bytes
        // keep about 14 of them.
        #expect(sent > 10 && sent < 20, "\(sent) messages of about 40 bytes, each counting 256 more, were kept before the bound")
        #expect(alice.connectedPeers.isEmpty)
        #expect(aliceEvents.events.contains { if case let .peerDisconnected(_, reason?) = $0 { reason.code == .sessionBufferFull } else { false } })
        await network.shutdown()
    }

    @Test("broadcasts to a suspended peer beyond maximumUnacknowledgedBytes disconnect it with sessionBufferFull, while every broadcast still reaches a connected peer, in order")
    func bufferFullByBroadcast() async throws {
        let network = TestNetwork()
        let small: (inout PeerConfiguration) -> Void = { $0.maximumUnacknowledgedBytes = 4096 }
        let (alice, bob, _, _) = try await pair(network, configure: small)
        let carol = try await network.startTransceiver(named: "carol") { configuration in
            configuration.resumesSessions = true
            small(&configuration)
        }
        let atCarol = NIOLockedValueBox<[Int]>([])
        carol.receive(SessionNumber.self) { message in atCarol.withLockedValue { $0.append(message.n) } }
        try await network.waitUntilConnected(alice, carol)
        let aliceEvents = EventRecorder(alice, on: network)
        network.partition(alice, bob)
        await network.advance(by: .seconds(4))
        #expect(alice.connectedPeers.map(\.name).sorted() == ["bob", "carol"], "bob suspended, carol connected")
        // About 14 frames of about 40 bytes, each counting 256 more, fill bob's 4096 bytes; the
        // broadcast after that ends his session during its walk over the peers (before or after
        // carol's turn, as the dictionary orders them).
        // Carol's acknowledgements (50 ms after a frame) keep her side below the same bound.
        for n in 0..<40 {
            alice.broadcast(SessionNumber(n: n))
            if n % 4 == 3 { await network.advance(by: .milliseconds(60)) }
        }
        try await network.eventually("carol received all 40") { atCarol.withLockedValue { $0.count } == 40 }
        #expect(atCarol.withLockedValue { $0 } == Array(0..<40))
        #expect(alice.connectedPeers.map(\.name) == ["carol"])
        #expect(aliceEvents.events.contains { if case let .peerDisconnected(peer, reason?) = $0 { peer.name == "bob" && reason.code == .sessionBufferFull } else { false } })
        await network.shutdown()
    }

    @Test("stopping while a peer is suspended says in the log how many messages to it were not acknowledged")
    func stopWhileSuspendedIsLogged() async throws {
        let network = TestNetwork()
        let log = CapturedLog()
        let (alice, bob, _, _) = try await pair(network) { $0.logger = log.logger }
        let toBob = try #require(alice.connectedPeers.first)
        network.partition(alice, bob)
        await network.advance(by: .seconds(4))
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "suspended")
        for n in 0..<3 { try await alice.send(SessionNumber(n: n), to: [toBob]) }
        await alice.shutdown()
        let lines = log.messages(containing: "Stopped while", atLeast: .warning)
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.contains(#""bob""#) == true && lines.first?.contains(": 3 messages (") == true, "\(lines)")
        await network.shutdown()
    }

    @Test("a connection whose handshake timed out on the peer's side, while ours completed, leaves the session suspended on both sides: the next one resumes it, and nothing is lost")
    func peerFailsBeforeResuming() async throws {
        let network = TestNetwork()
        // Bob's handshake timeout (1 s) comes before alice's peer timeout (2.5 s) on a connection
        // where nothing of alice's reaches him.
        let late = try await lateSetUp(network)
        let (alice, bob) = (late.alice, late.bob)
        // Nothing of alice's reaches bob, so his handshakes time out and he fails each new
        // connection with peerkit.error, while alice, who got his hello, saw each one
        // established: what a hello delayed past the handshake timeout does on a loaded machine.
        network.dropFrames(from: alice, to: bob)
        network.heal(alice, bob)
        // Bob's own redials wait three handshake timeouts (3 s) before they fail.
        await network.advance(by: .seconds(5))
        let kinds = { (recorder: EventRecorder) in
            recorder.events.compactMap { event -> String? in
                switch event {
                case .peerSuspended: "suspended"
                case let .peerDisconnected(_, reason): "disconnected(\(reason?.code.description ?? "nil"))"
                case .peerResumed: "resumed"
                default: nil
                }
            }
        }
        #expect(kinds(late.senderEvents).starts(with: ["suspended", "resumed", "suspended"]), "alice saw a connection established and failed by bob: \(kinds(late.senderEvents))")
        // The link drops once more and comes back whole. (Clearing the drop rule on a link that
        // is up would pass what follows a dropped hello on a connection under way, which no
        // real network does.)
        network.partition(alice, bob)
        await network.advance(by: .seconds(4))
        network.clearFaults()
        network.heal(alice, bob)
        for _ in 0..<4 { await network.advance(by: .seconds(1)) }
        try await network.waitUntilConnected(alice, bob)
        try await network.eventually("bob received 20") { late.atReceiver.withLockedValue { $0.count } == 20 }
        #expect(late.atReceiver.withLockedValue { $0 } == Array(0..<20))
        #expect(!kinds(late.senderEvents).contains { $0.hasPrefix("disconnected") }, "\(kinds(late.senderEvents))")
        #expect(!kinds(late.receiverEvents).contains { $0.hasPrefix("disconnected") }, "\(kinds(late.receiverEvents))")
        await network.shutdown()
    }

    /// The peers of a test where one peer's frames reach the other late (``lateSetUp(_:window:senderHasSmallerID:)``).
    struct Late {
        let alice: PeerTransceiver
        let bob: PeerTransceiver
        /// The peer whose frames are to arrive late, and the other one.
        let sender: PeerTransceiver
        let receiver: PeerTransceiver
        /// The numbers the receiver got from the sender, in order.
        let atReceiver: NIOLockedValueBox<[Int]>
        /// Everything each side reported, from before the link was cut.
        let senderEvents: EventRecorder
        let receiverEvents: EventRecorder
    }

    /// For the tests where one peer's frames reach the other late. Alice and bob (handshake
    /// timeout 1 s, resume window `window`) connect; the late one is `sender`: alice when
    /// `senderHasSmallerID` is nil, else the peer with the larger ID, or with
    /// `senderHasSmallerID` the smaller. Only connections the other (`receiver`) dials can
    /// complete (the sender's hello is late, the receiver's prompt); when the sender's ID is the
    /// smaller, its own dials win the tie-break at its side, so it must let the receiver's
    /// dials through. The sender sends 0..<10, which arrive; the link is cut for 4 s (both
    /// suspend), and it sends 10..<20.
    func lateSetUp(_ network: TestNetwork, window: Duration = .seconds(30), senderHasSmallerID: Bool? = nil) async throws -> Late {
        let (alice, bob, atAlice, atBob) = try await pair(network) {
            $0.handshakeTimeout = .seconds(1)
            $0.sessionResumeWindow = window
        }
        let aliceIsSmaller = alice.peerID.utf8.lexicographicallyPrecedes(bob.peerID.utf8)
        let bobSends = senderHasSmallerID.map { aliceIsSmaller != $0 } ?? false
        let (sender, receiver, atReceiver) = bobSends ? (bob, alice, atAlice) : (alice, bob, atBob)
        let late = Late(alice: alice, bob: bob, sender: sender, receiver: receiver, atReceiver: atReceiver,
                        senderEvents: EventRecorder(sender, on: network), receiverEvents: EventRecorder(receiver, on: network))
        let peer = try #require(sender.connectedPeers.first)
        for n in 0..<10 { try await sender.send(SessionNumber(n: n), to: [peer]) }
        try await network.eventually("the receiver got 10") { atReceiver.withLockedValue { $0.count } == 10 }
        network.partition(alice, bob)
        await network.advance(by: .seconds(4))
        for n in 10..<20 { try await sender.send(SessionNumber(n: n), to: [peer]) }
        return late
    }

    @Test("a redial of a suspended peer waits three handshake timeouts for the peer's hello: a peer that answers late (a loaded machine) resumes, instead of failing every attempt until its window runs out; whichever side is slow", arguments: [false, true])
    func lateHelloResumes(senderHasSmallerID: Bool) async throws {
        let network = TestNetwork()
        let late = try await lateSetUp(network, window: .seconds(20), senderHasSmallerID: senderHasSmallerID)
        let (alice, bob, sender, receiver, atReceiver, receiverEvents) = (late.alice, late.bob, late.sender, late.receiver, late.atReceiver, late.receiverEvents)
        // Everything of the sender's reaches the receiver 2 s late: after its handshake timeout
        // (1 s), within three of them. The receiver's redials wait that long.
        network.delayFrames(from: sender, to: receiver, by: .seconds(2))
        network.heal(alice, bob)
        for _ in 0..<10 { await network.advance(by: .seconds(1)) }
        try await network.eventually("the receiver got 20") { atReceiver.withLockedValue { $0.count } == 20 }
        #expect(atReceiver.withLockedValue { $0 } == Array(0..<20))
        let disconnections = receiverEvents.events.filter { if case .peerDisconnected = $0 { true } else { false } }
        #expect(disconnections.isEmpty, "\(disconnections)")
        #expect(receiverEvents.events.contains { if case .peerResumed = $0 { true } else { false } })
        await network.shutdown()
    }

    @Test("a connection that dies before the peer's resume arrived on it leaves the peer suspended, not half resumed: its redials still wait three handshake timeouts, and it resumes; whichever side is slow", arguments: [false, true])
    func diesWhileResuming(senderHasSmallerID: Bool) async throws {
        let network = TestNetwork()
        let late = try await lateSetUp(network, window: .seconds(30), senderHasSmallerID: senderHasSmallerID)
        let (alice, bob, sender, receiver, atReceiver, receiverEvents) = (late.alice, late.bob, late.sender, late.receiver, late.atReceiver, late.receiverEvents)
        // Back, but of the sender's frames only its hello, pings and pongs reach the receiver: its
        // resume does not, so the receiver's session waits for it on the new connection.
        network.dropFrames(from: sender, to: receiver) { !["peerkit.hello", "peerkit.ping", "peerkit.pong"].contains($0.type ?? "") }
        network.heal(alice, bob)
        await network.advance(by: .seconds(3))
        #expect(receiverEvents.events.contains { if case .peerResumed = $0 { true } else { false } })
        #expect(atReceiver.withLockedValue { $0.count } == 10)
        // That connection dies before the resume came. Then everything of the sender's comes 2 s
        // late: only redials that wait longer than the 1 s handshake timeout can resume.
        network.partition(alice, bob)
        await network.advance(by: .seconds(4))
        network.clearFaults()
        network.delayFrames(from: sender, to: receiver, by: .seconds(2))
        network.heal(alice, bob)
        for _ in 0..<10 { await network.advance(by: .seconds(1)) }
        try await network.eventually("the receiver got 20") { atReceiver.withLockedValue { $0.count } == 20 }
        #expect(atReceiver.withLockedValue { $0 } == Array(0..<20))
        let disconnections = receiverEvents.events.filter { if case .peerDisconnected = $0 { true } else { false } }
        #expect(disconnections.isEmpty, "\(disconnections)")
        await network.shutdown()
    }

    @Test("a peer that restarted (same peer ID, a new run) during the gap starts a new session: what was pending for its old run fails with peerRestarted")
    func restartedPeer() async throws {
        let network = TestNetwork()
        let (alice, bob, _, atBob) = try await pair(network)
        let aliceEvents = EventRecorder(alice, on: network)
        let toBob = try #require(alice.connectedPeers.first)
        network.partition(alice, bob)
        let request = Task.immediate {
            try await alice.request(SessionQuestion(n: 1), to: toBob, expecting: SessionAnswer.self, timeout: .seconds(60))
        }
        try await alice.send(SessionNumber(n: 1), to: [toBob])
        await network.advance(by: .seconds(4))
        // Bob restarts: its bye is lost in the partition; it comes back with the same peer ID.
        await bob.shutdown()
        try await bob.start()
        network.heal(alice, bob)
        await network.advance(by: .seconds(5))
        try await network.waitUntilConnected(alice, bob)
        let failure = await #expect(throws: PeerKitError.self) { try await request.value }
        #expect(failure?.code == .peerRestarted)
        #expect(atBob.withLockedValue { $0 }.isEmpty, "nothing of the old session was resent to the new run")
        let kinds = aliceEvents.events.compactMap { event -> String? in
            switch event {
            case .peerSuspended: "suspended"
            case let .peerDisconnected(_, reason): "disconnected(\(reason?.code.description ?? "nil"))"
            case .peerConnected: "connected"
            case .peerResumed: "resumed"
            default: nil
            }
        }
        #expect(kinds == ["suspended", "disconnected(peerRestarted)", "connected"])
        await network.shutdown()
    }

    @Test("a peer whose resume window ran out first starts again with the other, which kept the session: no protocol violation, nothing written twice, what was never written arrives, a waiting request fails with peerEndedSession")
    func oneSidedEnd() async throws {
        let network = TestNetwork()
        // Alice gives up on bob after 6 s; bob would wait 60 s for alice.
        let (alice, bob, atAlice, atBob) = try await pair(network, configure: { $0.sessionResumeWindow = .seconds(6) },
                                                          configureBob: { $0.sessionResumeWindow = .seconds(60) })
        let aliceEvents = EventRecorder(alice, on: network)
        let bobEvents = EventRecorder(bob, on: network)
        let toBob = try #require(alice.connectedPeers.first)
        let toAlice = try #require(bob.connectedPeers.first)
        for n in 0..<10 {
            try await alice.send(SessionNumber(n: n), to: [toBob])
            try await bob.send(SessionNumber(n: n), to: [toAlice])
        }
        try await network.eventually("both received 10") { atAlice.withLockedValue { $0.count } == 10 && atBob.withLockedValue { $0.count } == 10 }
        // The acknowledgements go out (50 ms), so both sides' counts are past 0 when the link is cut.
        await network.advance(by: .seconds(1))
        network.partition(alice, bob)
        // Written on the connection that is dying, and never acknowledged: lost, and said so.
        for n in 10..<15 { try await bob.send(SessionNumber(n: n), to: [toAlice]) }
        let request = Task.immediate {
            try await bob.request(SessionQuestion(n: 1), to: toAlice, expecting: SessionAnswer.self, timeout: .seconds(120))
        }
        await network.advance(by: .seconds(4))
        #expect(bob.connectedPeers.map(\.name) == ["alice"], "bob keeps alice, suspended")
        // Kept while alice is suspended, written nowhere: they go on in the new session.
        for n in 15..<20 { try await bob.send(SessionNumber(n: n), to: [toAlice]) }
        await network.advance(by: .seconds(6))
        #expect(alice.connectedPeers.isEmpty, "alice's window ran out")
        #expect(bob.connectedPeers.map(\.name) == ["alice"], "bob keeps alice, suspended")
        network.heal(alice, bob)
        await network.advance(by: .seconds(5))
        try await network.waitUntilConnected(alice, bob)

        let failure = await #expect(throws: PeerKitError.self) { try await request.value }
        #expect(failure?.code == .peerEndedSession, "\(String(describing: failure))")
        #expect(failure?.lostMessages == 6, "the 5 messages and the request written on the dying connection")
        for n in 100..<200 {
            try await alice.send(SessionNumber(n: n), to: [toBob])
            try await bob.send(SessionNumber(n: n), to: [toAlice])
        }
        try await network.eventually("both received the new messages") {
            atAlice.withLockedValue { $0.last } == 199 && atBob.withLockedValue { $0.last } == 199
        }
        #expect(atAlice.withLockedValue { $0 } == Array(0..<10) + Array(15..<20) + Array(100..<200))
        #expect(atBob.withLockedValue { $0 } == Array(0..<10) + Array(100..<200))
        func kinds(_ recorder: EventRecorder) -> [String] {
            recorder.events.compactMap { event -> String? in
                switch event {
                case .peerSuspended: "suspended"
                case let .peerDisconnected(_, reason): "disconnected(\(reason?.code.description ?? "nil"))"
                case .peerConnected: "connected"
                case .peerResumed: "resumed"
                case let .error(error): "error(\(error.code))"
                default: nil
                }
            }
        }
        #expect(kinds(aliceEvents) == ["suspended", "disconnected(sessionExpired)", "connected"], "\(aliceEvents.events)")
        #expect(kinds(bobEvents) == ["suspended", "resumed", "error(peerEndedSession)"], "\(bobEvents.events)")
        await network.shutdown()
    }

    @Test("a resource in flight when the link is cut is cancelled on both sides with resourceCancelled naming the connection's end; the peer resumes, and the resource sent again arrives whole")
    func resourceAcrossACut() async throws {
        let network = TestNetwork()
        let (alice, bob, _, _) = try await pair(network)
        let toBob = try #require(alice.connectedPeers.first)
        let bytes = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        // The first transfer's handler reads one chunk, then waits until the link is cut (the
        // 4 MiB window then holds the sender back, so the transfer cannot finish before the cut).
        let (gate, opener) = AsyncStream.makeStream(of: Void.self)
        let attempts = NIOLockedValueBox(0)
        let outcomes = Inbox<String>()
        let firstChunk = Inbox<Int>()
        bob.receiveResources(named: "doc") { resource in
            let attempt = attempts.withLockedValue { $0 += 1; return $0 }
            var received = 0
            do {
                for try await chunk in resource.chunks {
                    received += chunk.readableBytes
                    if attempt == 1, received == chunk.readableBytes {
                        firstChunk.put(received)
                        for await _ in gate { break }
                    }
                }
                outcomes.put("completed \(received)")
            } catch let error as PeerKitError {
                outcomes.put("\(error.code): \(error.description)")
            }
        }
        let transfer = try await alice.send(resource: .bytes(bytes), named: "doc", to: toBob)
        _ = try await firstChunk.take(1)
        network.partition(alice, bob)
        await network.advance(by: .seconds(5))
        opener.yield()
        opener.finish()
        let sent = await #expect(throws: PeerKitError.self) { try await transfer.finished() }
        #expect(sent?.code == .resourceCancelled)
        #expect(sent?.description.contains("a transfer does not continue on another connection; send it again once the peer is connected") == true, "\(String(describing: sent))")
        let received = try await outcomes.take(1)
        #expect(received.first?.hasPrefix("resourceCancelled: ") == true, "\(received)")
        #expect(alice.connectedPeers.map(\.name) == ["bob"], "bob is suspended, not disconnected")

        network.heal(alice, bob)
        await network.advance(by: .seconds(5))
        try await network.waitUntilConnected(alice, bob)
        let again = try await alice.send(resource: .bytes(bytes), named: "doc", to: toBob)
        try await again.finished()
        #expect(try await outcomes.take(1) == ["completed \(bytes.count)"])
        await network.shutdown()
    }
}
}
