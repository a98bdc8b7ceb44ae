import NIOCore
import Testing
@testable import PeerKit

@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine

    let local = Hello(peerID: "A", name: "alpha", serviceType: "chat", discoveryInfo: nil)
    let remote = Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: ["k": "v"])
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func machine() -> Machine {
        Machine(configuration: .init(
            localHello: local, heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5),
            maximumQueuedOutboundBytes: 1000, slowPeerGracePeriod: .seconds(10)
        ))
    }

    /// What a protocol failure looks like: `peerkit.error` with the reason, then a half-close.
    func failed(_ failure: Machine.Failure) -> Machine.Action {
        .close(sending: .error(reason: "Closing the connection: " + failure.reason + ".", replyTo: nil), mode: .halfClose, reason: .failed(failure))
    }

    func envelope(_ json: String) throws -> Envelope {
        try EnvelopeParser.parse(ByteBuffer(string: json))
    }

    func helloEnvelope(_ hello: Hello) throws -> Envelope {
        var frame = Machine.ControlFrame.hello(hello).encode()
        _ = frame.readInteger(as: UInt32.self)
        return try EnvelopeParser.parse(frame)
    }

    func established() throws -> Machine {
        var machine = machine()
        _ = machine.activated(now: start)
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == .established(remote))
        return machine
    }

    @Test("activation sends our hello; the peer's hello establishes the connection")
    func handshake() throws {
        var machine = machine()
        #expect(machine.activated(now: start) == .send(.hello(local)))
        #expect(!machine.isOpen)
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == .established(remote))
        #expect(machine.isOpen)
    }

    @Test("a first frame that is not a hello fails the handshake")
    func firstFrameNotHello() throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"AddItemCommand","payload":{}}"#), now: start)
        #expect(action == failed(.handshake("the first frame was a \"AddItemCommand\" message, not peerkit.hello")))
        #expect(machine.isEnding)
    }

    @Test("a hello of another service type, protocol, or our own peer ID is refused", arguments: [
        (#"{"protocol":1,"peerID":"B","name":"b","serviceType":"other"}"#, "the peer's service type is \"other\", not \"chat\""),
        (#"{"protocol":2,"peerID":"B","name":"b","serviceType":"chat"}"#, "the peer speaks protocol 2, and this peer speaks only protocol 1"),
        (#"{"protocol":1,"peerID":"A","name":"a","serviceType":"chat"}"#, "the connection leads back to this peer itself"),
        (#"{"protocol":1,"peerID":"","name":"a","serviceType":"chat"}"#, "the peer's peerID is empty"),
        (#"{"protocol":1,"name":"a","serviceType":"chat"}"#, "the peerkit.hello payload lacks protocol, peerID, name or serviceType"),
    ])
    func badHello(payload: String, reason: String) throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"peerkit.hello","payload":"# + payload + "}"), now: start)
        #expect(action == failed(.handshake(reason)))
    }

    @Test("a hello with extra keys (e.g. a later authentication field) is accepted")
    func helloWithExtraKeys() throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"B","name":"b","serviceType":"chat","auth":{"nonce":"x"}}}"#), now: start)
        #expect(action == .established(Hello(peerID: "B", name: "b", serviceType: "chat", discoveryInfo: nil)))
    }

    @Test("a second hello after the handshake is a protocol violation")
    func helloFlood() throws {
        var machine = try established()
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == failed(.handshake("a second peerkit.hello arrived after the handshake")))
        // Terminal: nothing more happens.
        #expect(machine.frameReceived(try envelope(#"{"type":"X","payload":{}}"#), now: start) == .none)
        #expect(machine.heartbeat(now: start + .seconds(60)) == .none)
    }

    @Test("pings are answered with pongs that name them; messages are delivered; unknown control types ignored")
    func established_traffic() throws {
        var machine = try established()
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.ping","id":"p9","payload":{}}"#), now: start) == .send(.pong(replyTo: "p9")))
        let message = try envelope(#"{"type":"X","id":"1","payload":{"a":1}}"#)
        #expect(machine.frameReceived(message, now: start) == .deliver(message))
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.future","payload":{}}"#), now: start) == .none)
        let errorReply = try envelope(#"{"type":"peerkit.error","replyTo":"1","payload":{"reason":"No."}}"#)
        #expect(machine.frameReceived(errorReply, now: start) == .deliver(errorReply))
    }

    @Test("an idle peer is pinged once per silence, and one silent past the timeout is dropped")
    func heartbeat() throws {
        var machine = try established()
        // The side that dialled drives the heartbeat: it pings at the tick nearest the end of
        // the interval, so from half a tick (125 ms) before it.
        #expect(machine.heartbeat(now: start + .milliseconds(374)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(375)) == .send(.ping(id: "ping-1")))
        // The ping is outstanding: no second ping.
        #expect(machine.heartbeat(now: start + .milliseconds(1000)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(2499)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(2500)) == .close(sending: nil, mode: .close, reason: .failed(.timedOut(silence: .milliseconds(2500)))))
        #expect(machine.isEnding)
    }

    @Test("a tick delayed by a busy event loop does not count the delay as the peer's silence")
    func stalledLoopIsNotSilence() throws {
        var machine = try established()
        #expect(machine.heartbeat(now: start + .milliseconds(500)) == .send(.ping(id: "ping-1")))
        // The loop was busy for 2 s: the pong may be waiting unread, so no verdict at this tick…
        #expect(machine.heartbeat(now: start + .milliseconds(2750), stalledFor: .milliseconds(2000)) == .none)
        #expect(!machine.isEnding)
        // …and the silence excludes the stall: 0.75 s counted, not 2.75 s.
        #expect(machine.heartbeat(now: start + .milliseconds(4499)) == .none)
        // A peer that stays silent is still dropped once the timeout passes in time the loop was listening.
        #expect(machine.heartbeat(now: start + .milliseconds(4500)) == .close(sending: nil, mode: .close, reason: .failed(.timedOut(silence: .milliseconds(2500)))))
    }

    @Test("a pong or any frame resets the silence")
    func pongResets() throws {
        var machine = try established()
        #expect(machine.heartbeat(now: start + .milliseconds(500)) == .send(.ping(id: "ping-1")))
        _ = machine.frameReceived(try envelope(#"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#), now: start + .milliseconds(600))
        #expect(machine.heartbeat(now: start + .milliseconds(974)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(975)) == .send(.ping(id: "ping-2")))
        #expect(machine.heartbeat(now: start + .milliseconds(3099)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(3100)) == .close(sending: nil, mode: .close, reason: .failed(.timedOut(silence: .milliseconds(2500)))))
    }

    @Test("the side that did not dial pings only when the dialler's ping is a beat overdue, and times out alike")
    func answeringSidePingsLate() throws {
        var configuration = machine().configuration
        configuration.drivesHeartbeat = false
        var machine = Machine(configuration: configuration)
        _ = machine.activated(now: start)
        _ = machine.frameReceived(try helloEnvelope(remote), now: start)
        // The dialler pings at the beat at 1.5 s (a 500 ms interval); this side at the first beat
        // after 625 ms of silence: 2.0 s. It is looked at on every beat all the same.
        #expect(machine.nextHeartbeat(now: start) == start + .milliseconds(500))
        #expect(machine.heartbeat(now: start + .milliseconds(750)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(999)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(1000)) == .send(.ping(id: "ping-1")))
        #expect(machine.heartbeat(now: start + .milliseconds(2499)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(2500)) == .close(sending: nil, mode: .close, reason: .failed(.timedOut(silence: .milliseconds(2500)))))
    }

    /// Runs two ends of an idle link for `seconds`, both ticking on one grid (every 250 ms, as
    /// ``PeerClock`` ticks real timers), each frame arriving `latency` after it was sent; returns
    /// how many pings each end sent.
    func idleLink(seconds: Int, latency: TimeAmount, bothDrive: Bool = false) throws -> (dialler: Int, answerer: Int) {
        var dialler = try established()
        var answerer = try established()
        if !bothDrive {
            var configuration = answerer.configuration
            configuration.drivesHeartbeat = false
            answerer = Machine(configuration: configuration)
            _ = answerer.activated(now: start)
            _ = answerer.frameReceived(try helloEnvelope(remote), now: start)
        }
        var pings = (dialler: 0, answerer: 0)
        let tick = dialler.configuration.tickInterval
        for step in 1...(seconds * 4) {
            let now = start + .nanoseconds(tick.nanoseconds * Int64(step))
            // Both ends tick at once, and decide before either's ping arrives; each ping is
            // answered, and its pong arrives, within the tick.
            let actions = (dialler: dialler.heartbeat(now: now), answerer: answerer.heartbeat(now: now))
            for diallerSide in [true, false] {
                guard case let .send(.ping(id)) = diallerSide ? actions.dialler : actions.answerer else { continue }
                if diallerSide { pings.dialler += 1 } else { pings.answerer += 1 }
                let ping = try envelope(#"{"type":"peerkit.ping","id":"\#(id)","payload":{}}"#)
                let pong = try envelope(#"{"type":"peerkit.pong","replyTo":"\#(id)","payload":{}}"#)
                if diallerSide {
                    _ = answerer.frameReceived(ping, now: now + latency)
                    _ = dialler.frameReceived(pong, now: now + latency + latency)
                } else {
                    _ = dialler.frameReceived(ping, now: now + latency)
                    _ = answerer.frameReceived(pong, now: now + latency + latency)
                }
            }
        }
        #expect(dialler.isOpen && answerer.isOpen)
        return pings
    }

    @Test("an idle link whose ends tick together makes one exchange per interval, the dialler's")
    func oneExchangePerInterval() throws {
        // 10 s at a 500 ms interval: 20 exchanges, all pinged by the dialler.
        for latency in [TimeAmount.microseconds(50), .milliseconds(20)] {
            let pings = try idleLink(seconds: 10, latency: latency)
            #expect(pings.dialler == 20 && pings.answerer == 0, "latency \(latency)")
        }
        // Were both ends to drive, both would be due at the same ticks: twice the pings.
        let both = try idleLink(seconds: 10, latency: .microseconds(50), bothDrive: true)
        #expect(both.dialler + both.answerer > 20)
    }

    /// Two ends of an idle link at PeerKit's default heartbeat (1.25 s, timeout 2.5 s, a tick
    /// every 0.25 s), run as ``HeartbeatTicker`` runs them: each end is looked at only at the
    /// first grid tick at or after the time its last look gave (``ConnectionStateMachine/nextHeartbeat(now:)``).
    /// The link's handshake completes `offset` after a whole second; each look runs `lateness`
    /// after its grid tick (the loop's `now`, as the real clock's looks run); each ping arrives
    /// `latency` after it is sent and its pong `latency` after that. Returns the times of each
    /// end's pings and the grid ticks that looked at either end (one entry per end looked at).
    func skippingIdleLink(seconds: Int, offset: TimeAmount, latency: TimeAmount, lateness: TimeAmount = .zero) throws -> (dialler: [NIODeadline], answerer: [NIODeadline], looks: [NIODeadline]) {
        func end(drives: Bool) throws -> Machine {
            var machine = Machine(configuration: .init(
                localHello: local, heartbeatInterval: .milliseconds(1250), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5),
                drivesHeartbeat: drives
            ))
            _ = machine.activated(now: start + offset)
            _ = machine.frameReceived(try helloEnvelope(remote), now: start + offset)
            return machine
        }
        var ends = [try end(drives: true), try end(drives: false)]
        var due: [NIODeadline?] = [start + offset, start + offset]
        var pings: [[NIODeadline]] = [[], []]
        var looks: [NIODeadline] = []
        let tick = ends[0].configuration.tickInterval
        #expect(tick == .milliseconds(250))
        for step in 1...(seconds * 4) {
            let gridTick = start + .nanoseconds(tick.nanoseconds * Int64(step))
            let now = gridTick + lateness
            var sent: [(from: Int, id: String)] = []
            for side in 0...1 {
                // The ticker's timer is set for the first grid tick at or after the time given.
                guard let time = due[side], time <= gridTick else { continue }
                looks.append(gridTick)
                if case let .send(.ping(id)) = ends[side].heartbeat(now: now) {
                    pings[side].append(now)
                    sent.append((side, id))
                }
                due[side] = ends[side].nextHeartbeat(now: now)
            }
            for (from, id) in sent {
                _ = ends[1 - from].frameReceived(try envelope(#"{"type":"peerkit.ping","id":"\#(id)","payload":{}}"#), now: now + latency)
                _ = ends[from].frameReceived(try envelope(#"{"type":"peerkit.pong","replyTo":"\#(id)","payload":{}}"#), now: now + latency + latency)
            }
        }
        #expect(ends[0].isOpen && ends[1].isOpen)
        return (pings[0], pings[1], looks)
    }

    @Test("an idle link's dialler pings on the beat from its second ping on, once an interval, wherever the link's traffic stopped; the link is looked at about twice an interval, not eight times", arguments: [0, 100, 250, 400, 600, 800, 1000, 1200])
    func idleLinkLocksToBeats(offsetMilliseconds: Int) throws {
        let interval: UInt64 = 1_250_000_000
        for latency in [TimeAmount.microseconds(50), .milliseconds(20)] {
            // Looks that run late (a busy loop) stay on the beat: measured from a late `now`, a
            // re-look a whole interval after the ping would fall just past the beat's tick.
            for lateness in [TimeAmount.zero, .milliseconds(3), .milliseconds(100), .milliseconds(200)] {
                let link = try skippingIdleLink(seconds: 20, offset: .milliseconds(Int64(offsetMilliseconds)), latency: latency, lateness: lateness)
                #expect(link.dialler.dropFirst().allSatisfy { ($0 - lateness).uptimeNanoseconds % interval == 0 }, "pings at \(link.dialler), \(lateness) late")
                // One exchange an interval: 15 or 16 in 20 s, by the dialler alone.
                #expect((15...16).contains(link.dialler.count) && link.answerer.isEmpty, "\(link)")
                // Every tick of both ends would be 160 looks; one per end per beat is 32, and
                // from the third second on, every look is on a beat.
                #expect(link.looks.count <= 34, "\(link.looks.count) looks, \(lateness) late")
                let settled = link.looks.filter { $0 >= start + .seconds(3) }
                #expect(settled.allSatisfy { $0.uptimeNanoseconds % interval == 0 }, "looks at \(settled), \(lateness) late")
            }
        }
    }

    @Test("nextHeartbeat says when the machine next has something to decide: the handshake's deadline, the ping, the re-ping, every tick while a limit's grace runs, never once ending")
    func nextHeartbeatTimes() throws {
        var fresh = machine()
        _ = fresh.activated(now: start)
        #expect(fresh.nextHeartbeat(now: start) == start + .seconds(5))
        var machine = try established()
        // The dialler's ping: after 375 ms of silence (the beat at 1.5 s comes later).
        #expect(machine.nextHeartbeat(now: start) == start + .milliseconds(375))
        #expect(machine.heartbeat(now: start + .milliseconds(374)) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(375)) == .send(.ping(id: "ping-1")))
        // Outstanding: looked at again on the next beat (1.5 s), before the re-ping a side that
        // stopped reading would send (at 1.75 s) and the timeout (at 3.5 s).
        #expect(machine.nextHeartbeat(now: start + .milliseconds(375)) == start + .milliseconds(500))
        // Over the outbox limit: every tick until the grace period ends or the outbox drains.
        #expect(machine.heartbeat(now: start + .milliseconds(500), queuedOutboundBytes: 2000) == .none)
        #expect(machine.nextHeartbeat(now: start + .milliseconds(500)) == start + .milliseconds(500))
        // Drained, and the pong in at 1.6 s: the next ping after 375 ms of silence, before the beat at 2.0 s.
        _ = machine.frameReceived(try envelope(#"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#), now: start + .milliseconds(600))
        #expect(machine.heartbeat(now: start + .milliseconds(750), queuedOutboundBytes: 0) == .none)
        #expect(machine.nextHeartbeat(now: start + .milliseconds(750)) == start + .milliseconds(975))
        #expect(machine.closeRequested(.stopped) == .close(sending: .bye(reason: nil), mode: .halfClose, reason: .stopped))
        #expect(machine.nextHeartbeat(now: start + .seconds(1)) == nil)
    }

    @Test("no hello within the handshake timeout fails the connection")
    func handshakeTimeout() {
        var machine = machine()
        _ = machine.activated(now: start)
        #expect(machine.heartbeat(now: start + .seconds(4)) == .none)
        #expect(machine.heartbeat(now: start + .seconds(5)) == failed(.handshake("no peerkit.hello arrived within 5.0 s")))
    }

    @Test("bye closes gracefully and carries its optional reason")
    func bye() throws {
        var machine = try established()
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.bye","payload":{"reason":"duplicate connection"}}"#), now: start)
            == .close(sending: nil, mode: .close, reason: .peerSaidBye(reason: "duplicate connection")))
        var other = try established()
        #expect(other.frameReceived(try envelope(#"{"type":"peerkit.bye","payload":{}}"#), now: start) == .close(sending: nil, mode: .close, reason: .peerSaidBye(reason: nil)))
        // The reason is reported once: the socket closing afterwards reports nothing more.
        #expect(other.channelClosed() == .none)
    }

    @Test("closing says bye only after the handshake")
    func closing() throws {
        var fresh = machine()
        _ = fresh.activated(now: start)
        #expect(fresh.closeRequested(.stopped) == .close(sending: nil, mode: .close, reason: .stopped))
        var machine = try established()
        #expect(machine.closeRequested(.stopped) == .close(sending: .bye(reason: nil), mode: .halfClose, reason: .stopped))
        #expect(machine.closeRequested(.stopped) == .none)
    }

    @Test("an oversized or malformed frame fails the connection")
    func rejectedFrames() throws {
        var machine = try established()
        #expect(machine.frameRejected(.frameTooLarge(length: 99, limit: 10)) == failed(.frameTooLarge(length: 99, limit: 10)))
        var other = try established()
        #expect(other.frameRejected(.malformedEnvelope("the envelope has no \"type\"")) == failed(.malformed("the envelope has no \"type\"")))
    }

    @Test("before the hello, a length field that reads as text is named as another protocol's first bytes; a binary one, or one after the hello, is a frame too large")
    func foreignGreeting() throws {
        // "SSH-" as a big-endian length: 1,397,966,893 bytes.
        let ssh = 0x5353_482D
        var dialler = machine()
        _ = dialler.activated(now: start)
        #expect(dialler.frameRejected(.frameTooLarge(length: ssh, limit: 65536))
            == failed(.handshake("it does not speak PeerKit: its first bytes were \"SSH-\" (read as a frame length, 1397966893 bytes, over the 65536-byte limit before the hello)")))
        var binary = machine()
        _ = binary.activated(now: start)
        #expect(binary.frameRejected(.frameTooLarge(length: 1 << 20, limit: 65536)) == failed(.frameTooLarge(length: 1 << 20, limit: 65536)))
        var open = try established()
        #expect(open.frameRejected(.frameTooLarge(length: ssh, limit: 16 << 20)) == failed(.frameTooLarge(length: ssh, limit: 16 << 20)))
        #expect(Machine.text(ofLengthField: 0x4745_5420) == "GET ")
        #expect(Machine.text(ofLengthField: 0x0A41_4141) == nil, "a newline is not printable")
    }

    // MARK: Lifecycle and limits

    @Test("any bytes from the peer prove it alive, even in the middle of a large frame")
    func bytesProveLife() throws {
        var machine = try established()
        // A frame that takes 10 s to arrive: bytes keep coming every 400 ms.
        for step in 1...25 {
            machine.bytesArrived(now: start + .milliseconds(400 * Int64(step)))
            #expect(machine.heartbeat(now: start + .milliseconds(400 * Int64(step) + 100)) == .none)
        }
        #expect(machine.isOpen)
    }

    @Test("while this side has paused reading, the peer is never timed out and is pinged every interval")
    func pausedReading() throws {
        var machine = try established()
        #expect(machine.heartbeat(now: start + .seconds(1), readingPaused: true) == .send(.ping(id: "ping-1")))
        #expect(machine.heartbeat(now: start + .seconds(2), readingPaused: true) == .send(.ping(id: "ping-2")))
        #expect(machine.heartbeat(now: start + .seconds(30), readingPaused: true) == .send(.ping(id: "ping-3")))
        #expect(machine.isOpen)
        // Reading resumed and nothing arrives: the normal timeout applies from the last paused tick.
        #expect(machine.heartbeat(now: start + .seconds(32), readingPaused: false) == .none)
        #expect(machine.heartbeat(now: start + .milliseconds(32_500), readingPaused: false) == .close(sending: nil, mode: .close, reason: .failed(.timedOut(silence: .milliseconds(2500)))))
    }

    @Test("a peer whose outbox stays over the limit past the grace period is disconnected as too slow")
    func slowPeer() throws {
        var machine = try established()
        // Over the 1000-byte limit, but it answers pings: within the grace period nothing happens.
        #expect(machine.heartbeat(now: start + .seconds(1), queuedOutboundBytes: 5000) == .send(.ping(id: "ping-1")))
        machine.bytesArrived(now: start + .seconds(5))
        #expect(machine.heartbeat(now: start + .seconds(5), queuedOutboundBytes: 5000) == .none)
        // Back under the limit: the grace period starts again.
        _ = machine.heartbeat(now: start + .seconds(6), queuedOutboundBytes: 10)
        machine.bytesArrived(now: start + .seconds(15))
        #expect(machine.heartbeat(now: start + .seconds(15), queuedOutboundBytes: 5000) == .none)
        machine.bytesArrived(now: start + .seconds(24))
        #expect(machine.heartbeat(now: start + .seconds(24), queuedOutboundBytes: 5000) == .none)
        machine.bytesArrived(now: start + .seconds(25))
        #expect(machine.heartbeat(now: start + .seconds(25), queuedOutboundBytes: 5000)
            == .close(sending: nil, mode: .close, reason: .failed(.tooSlow(queuedBytes: 5000, limit: 1000, grace: .seconds(10)))))
        #expect(Machine.CloseReason.failed(.tooSlow(queuedBytes: 5000, limit: 1000, grace: .seconds(10))).error(peer: "p")
            == .peerTooSlow(peer: "p", queuedBytes: 5000, limit: 1000, grace: .seconds(10)))
    }

    @Test("while the transceiver's outbound budget is spent, a peer holding a megabyte or more of it all through the grace period is disconnected as too slow; one holding less, or a spent budget that recovers, is not")
    func spentOutboundBudget() throws {
        var machine = Machine(configuration: .init(
            localHello: local, heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5),
            maximumQueuedOutboundBytes: 32 << 20, slowPeerGracePeriod: .seconds(10), maximumTotalQueuedOutboundBytes: 4 << 20
        ))
        _ = machine.activated(now: start)
        #expect(machine.frameReceived(try helloEnvelope(remote), now: start) == .established(remote))
        let mega = PeerConnection.outboxHighWatermark
        /// A tick at `seconds` with the peer heard from; `held` is what it holds of the spent
        /// budget (0: the budget is not spent).
        func tick(_ seconds: Int, held: Int) -> Machine.Action {
            machine.bytesArrived(now: start + .seconds(Int64(seconds)))
            return machine.heartbeat(now: start + .seconds(Int64(seconds)), queuedOutboundBytes: 2 * mega, heldOfSpentBudget: held)
        }
        // Under its own limit; the budget spent, but the peer holds less than a megabyte of it.
        #expect(tick(1, held: mega - 1) == .none)
        #expect(tick(20, held: mega - 1) == .none)
        // A megabyte: the grace period starts; the budget recovering restarts it.
        #expect(tick(21, held: mega) == .none)
        #expect(tick(25, held: 0) == .none)
        #expect(tick(26, held: mega) == .none)
        #expect(tick(35, held: mega) == .none)
        let failure = Machine.Failure.overOutboundBudget(queuedBytes: mega, budget: 4 << 20, grace: .seconds(10))
        #expect(tick(36, held: mega) == .close(sending: nil, mode: .close, reason: .failed(failure)))
        #expect(Machine.CloseReason.failed(failure).error(peer: "p")
            == .peerTooSlow(peer: "p", queuedBytes: mega, budget: 4 << 20, grace: .seconds(10)))
    }

    @Test("a duplicate connection says bye with its reason and keeps delivering what the peer sent before reading it")
    func retiredDuplicate() throws {
        var machine = try established()
        #expect(machine.closeRequested(.duplicate) == .close(sending: .bye(reason: "duplicate connection"), mode: .awaitPeer, reason: .duplicate))
        let late = try envelope(#"{"type":"Note","payload":{}}"#)
        #expect(machine.frameReceived(late, now: start) == .deliver(late))
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.ping","id":"p","payload":{}}"#), now: start) == .none)
        #expect(machine.channelClosed() == .none)
    }

    @Test("a quiet duplicate (a link the peer lost) says bye and closes at once: nothing more will come on it")
    func retiredQuietDuplicate() throws {
        var machine = try established()
        // Heard from at `start`; the heartbeat interval is 500 ms.
        #expect(machine.closeRequested(.duplicate, now: start + .milliseconds(100)) == .close(sending: .bye(reason: "duplicate connection"), mode: .awaitPeer, reason: .duplicate))
        var quiet = try established()
        #expect(quiet.closeRequested(.duplicate, now: start + .milliseconds(600)) == .close(sending: .bye(reason: "duplicate connection"), mode: .close, reason: .duplicate))
    }

    @Test("a retired duplicate the peer lost stops waiting for its bye once nothing has arrived on it for a heartbeat interval")
    func retiredLostDuplicateClosesWhenQuiet() throws {
        // Heard from at `start`; the heartbeat interval is 500 ms. The peer dialled again because
        // it lost this connection, yet this end still hears it (its old address can still send).
        var machine = try established()
        let bye = Machine.ControlFrame.bye(reason: "duplicate connection")
        #expect(machine.closeRequested(.duplicate, now: start + .milliseconds(100), peerLostIt: true) == .close(sending: bye, mode: .awaitPeer, reason: .duplicate))
        // Looked at when its silence would reach an interval.
        #expect(machine.nextHeartbeat(now: start + .milliseconds(100)) == start + .milliseconds(500))
        // What the peer wrote before arrives, and pushes the end later.
        let late = try envelope(#"{"type":"Note","payload":{}}"#)
        #expect(machine.frameReceived(late, now: start + .milliseconds(400)) == .deliver(late))
        #expect(machine.heartbeat(now: start + .milliseconds(500)) == .none)
        #expect(machine.nextHeartbeat(now: start + .milliseconds(500)) == start + .milliseconds(900))
        // A look 400 ms late (this side's loop was busy): the delay is not the peer's silence.
        #expect(machine.heartbeat(now: start + .milliseconds(1200), stalledFor: .milliseconds(400)) == .none)
        #expect(machine.nextHeartbeat(now: start + .milliseconds(1200)) == start + .milliseconds(1300))
        #expect(machine.heartbeat(now: start + .milliseconds(1300)) == .finishClosing)
        // Then nothing more is delivered, looked at or reported.
        #expect(machine.frameReceived(late, now: start + .milliseconds(1400)) == .none)
        #expect(machine.nextHeartbeat(now: start + .milliseconds(1400)) == nil)
        #expect(machine.channelClosed() == .none)

        // The loser of two connections dialled at once waits for the bye, however quiet it is
        // (up to the close's timeout, which its handler keeps).
        var simultaneous = try established()
        #expect(simultaneous.closeRequested(.duplicate, now: start + .milliseconds(100)) == .close(sending: bye, mode: .awaitPeer, reason: .duplicate))
        #expect(simultaneous.nextHeartbeat(now: start + .milliseconds(100)) == nil)
        #expect(simultaneous.heartbeat(now: start + .seconds(3)) == .none)
        #expect(simultaneous.frameReceived(late, now: start + .seconds(3)) == .deliver(late))
    }

    @Test("a retired duplicate closes its socket when the peer's own bye arrives: nothing more can come on it")
    func retiredDuplicateClosesOnBye() throws {
        var machine = try established()
        _ = machine.closeRequested(.duplicate)
        let late = try envelope(#"{"type":"Note","payload":{}}"#)
        #expect(machine.frameReceived(late, now: start) == .deliver(late))
        let bye = try envelope(#"{"type":"peerkit.bye","payload":{"reason":"duplicate connection"}}"#)
        #expect(machine.frameReceived(bye, now: start) == .finishClosing)
        // After it, nothing more is delivered, and the close is not reported again.
        #expect(machine.frameReceived(late, now: start) == .none)
        #expect(machine.channelClosed() == .none)
    }

    @Test("every way a connection ends is reported exactly once")
    func reportedOnce() throws {
        var lost = try established()
        #expect(lost.channelClosed() == .reportClosed(.connectionLost))
        #expect(lost.channelClosed() == .none)
        #expect(lost.closeRequested(.stopped) == .none)
        var reset = try established()
        #expect(reset.transportFailed("connection reset by peer") == .close(sending: nil, mode: .close, reason: .transportError("connection reset by peer")))
        #expect(reset.channelClosed() == .none)
        #expect(reset.heartbeat(now: start + .seconds(60)) == .none)
        var refused = machine()
        _ = refused.activated(now: start)
        let action = refused.frameReceived(try envelope(#"{"type":"peerkit.error","payload":{"reason":"Closing the connection: the peer's service type is \"a\", not \"b\"."}}"#), now: start)
        #expect(action == .close(sending: nil, mode: .close, reason: .failed(.handshake("the peer refused the connection: Closing the connection: the peer's service type is \"a\", not \"b\"."))))
        #expect(refused.channelClosed() == .none)
    }

    @Test("a peer's error frame ends the connection with its reason, control characters escaped")
    func peerError() throws {
        var machine = try established()
        let action = machine.frameReceived(try envelope(#"{"type":"peerkit.error","payload":{"reason":"bad\nFAKE LOG LINE"}}"#), now: start)
        #expect(action == .close(sending: nil, mode: .close, reason: .peerFailed(reason: "bad\\nFAKE LOG LINE")))
    }

    @Test("a hello with a name over 63 bytes, a long peer ID or oversized discovery info is refused", arguments: [
        (#"{"protocol":1,"peerID":"B","name":"\#(String(repeating: "n", count: 64))","serviceType":"chat"}"#, "the peer's name is 64 bytes long, over the 63 bytes of a DNS-SD instance name"),
        (#"{"protocol":1,"peerID":"B","name":"","serviceType":"chat"}"#, "the peer's name is empty"),
        (#"{"protocol":1,"peerID":"\#(String(repeating: "i", count: 65))","name":"b","serviceType":"chat"}"#, "the peer's peerID is 65 bytes long, over the limit of 64"),
        (#"{"protocol":1,"peerID":"B","name":"b","serviceType":"chat","discoveryInfo":{"k":"\#(String(repeating: "v", count: 300))"}}"#, "the peer's discoveryInfo entry \"k\" is longer than the 255 bytes of a TXT string"),
        (#"{"protocol":1,"peerID":"B","name":"b","serviceType":"chat","features":[\#((0..<33).map { "\"f\($0)\"" }.joined(separator: ","))]}"#, "the peer's hello lists 33 features, over the limit of 32"),
        (#"{"protocol":1,"peerID":"B","name":"b","serviceType":"chat","features":["\#(String(repeating: "f", count: 65))"]}"#, "the peer's hello lists a feature name of 65 bytes, over the limit of 64"),
    ])
    func untrustedHello(payload: String, reason: String) throws {
        var machine = machine()
        _ = machine.activated(now: start)
        let action = machine.frameReceived(try envelope(#"{"type":"peerkit.hello","payload":"# + payload + "}"), now: start)
        #expect(action == failed(.handshake(reason)))
    }

    @Test("a rename updates the peer's name; an oversized one is refused")
    func rename() throws {
        var machine = try established()
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.rename","payload":{"name":"beta #2"}}"#), now: start) == .renamed(name: "beta #2"))
        #expect(machine.isOpen)
        let long = String(repeating: "x", count: 64)
        #expect(machine.frameReceived(try envelope(#"{"type":"peerkit.rename","payload":{"name":"\#(long)"}}"#), now: start)
            == failed(.handshake("the peer's new name is 64 bytes long, over the 63 bytes of a DNS-SD instance name")))
    }
}

@Suite("Log-safe text")
struct LogSafeTests {
    @Test("control characters are escaped so a peer cannot start a fake log line")
    func escapes() {
        #expect(LogSafe.text("vm\n2026-11-22 error: fake") == "vm\\n2026-11-22 error: fake")
        #expect(LogSafe.text("a\u{1B}[31mred") == "a\\u{1B}[31mred")
        #expect(LogSafe.text("tab\there") == "tab\\there")
        #expect(LogSafe.text("Küche 🍳") == "Küche 🍳")
    }

    @Test("long text is cut at a character boundary and marked")
    func cuts() {
        let cut = LogSafe.text(String(repeating: "é", count: 4 * 1024 * 1024), maximumBytes: 256)
        #expect(cut.utf8.count <= 256 + 3)
        #expect(cut.hasSuffix("…"))
    }

    @Test("printable ASCII within the limit is kept as it is; DEL, and ASCII over the limit, are not")
    func printableASCII() {
        let printable = String(decoding: Array(0x20 ... 0x7E), as: UTF8.self)
        #expect(LogSafe.text(printable) == printable)
        #expect(LogSafe.text("No handler for type NoSuchCommand.", maximumBytes: 34) == "No handler for type NoSuchCommand.")
        #expect(LogSafe.text("a\u{7F}b") == "a\\u{7F}b")
        #expect(LogSafe.text(String(repeating: "a", count: 300)) == String(repeating: "a", count: 256) + "…")
        #expect(LogSafe.text("No handler for type NoSuchCommand.", maximumBytes: 33) == "No handler for type NoSuchCommand…")
    }
}

@Suite("Tie-break")
struct TieBreakTests {
    @Test("both sides keep the connection dialled by the smaller peer ID")
    func symmetric() {
        // "A" < "B": keep the connection A dialled. On A it is outbound, on B inbound.
        #expect(TieBreak.newConnectionWins(existing: .inbound, new: .outbound, localPeerID: "A", remotePeerID: "B"))
        #expect(!TieBreak.newConnectionWins(existing: .outbound, new: .inbound, localPeerID: "A", remotePeerID: "B"))
        #expect(TieBreak.newConnectionWins(existing: .outbound, new: .inbound, localPeerID: "B", remotePeerID: "A"))
        #expect(!TieBreak.newConnectionWins(existing: .inbound, new: .outbound, localPeerID: "B", remotePeerID: "A"))
    }

    @Test("two connections dialled by the same side keep the older one")
    func sameDirection() {
        #expect(!TieBreak.newConnectionWins(existing: .outbound, new: .outbound, localPeerID: "A", remotePeerID: "B"))
        #expect(!TieBreak.newConnectionWins(existing: .inbound, new: .inbound, localPeerID: "A", remotePeerID: "B"))
    }

    @Test("a new connection replaces a quiet one, whoever dialled either: the peer lost the quiet one")
    func quietExistingLoses() {
        for (existing, new) in [(TieBreak.Direction.outbound, TieBreak.Direction.inbound), (.inbound, .outbound), (.outbound, .outbound), (.inbound, .inbound)] {
            for (local, remote) in [("A", "B"), ("B", "A")] {
                #expect(TieBreak.newConnectionWins(existing: existing, new: new, localPeerID: local, remotePeerID: remote, existingPresumedLost: true))
            }
        }
    }

    @Test("an existing connection is presumed lost once quiet, or once a heartbeat interval older than the new one")
    func presumedLost() {
        let interval = TimeAmount.milliseconds(1250)
        let established = NIODeadline.uptimeNanoseconds(10_000_000_000)
        // Two connections dialled at once complete their handshakes moments apart: neither is lost.
        #expect(!TieBreak.presumedLost(quiet: false, establishedAt: established, now: established + .milliseconds(300), heartbeatInterval: interval))
        #expect(!TieBreak.presumedLost(quiet: false, establishedAt: established, now: established + interval - .nanoseconds(1), heartbeatInterval: interval))
        // A new connection an interval later or more: its dialler lost the old one, quiet or not
        // (a host whose address went away can still send from it, so the old one can stay loud).
        #expect(TieBreak.presumedLost(quiet: false, establishedAt: established, now: established + interval, heartbeatInterval: interval))
        #expect(TieBreak.presumedLost(quiet: false, establishedAt: established, now: established + .seconds(3), heartbeatInterval: interval))
        // Quiet, whatever its age; unknown age and not quiet: not lost.
        #expect(TieBreak.presumedLost(quiet: true, establishedAt: established, now: established, heartbeatInterval: interval))
        #expect(!TieBreak.presumedLost(quiet: false, establishedAt: nil, now: established + .seconds(60), heartbeatInterval: interval))
    }

    @Test("a connection is quiet once nothing arrived for a heartbeat interval, and not once something does")
    func quiet() throws {
        var machine = ConnectionStateMachine(configuration: .init(
            localHello: Hello(peerID: "A", name: "alpha", serviceType: "chat", discoveryInfo: nil), heartbeatInterval: .milliseconds(500),
            peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5), maximumQueuedOutboundBytes: 1000, slowPeerGracePeriod: .seconds(10)
        ))
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        _ = machine.activated(now: start)
        // Not open yet: a handshake has its own timeout, and no tie-break involves it.
        #expect(!machine.isQuiet(now: start + .seconds(1)))
        var hello = ConnectionStateMachine.ControlFrame.hello(Hello(peerID: "B", name: "beta", serviceType: "chat", discoveryInfo: nil)).encode()
        _ = hello.readInteger(as: UInt32.self)
        _ = machine.frameReceived(try EnvelopeParser.parse(hello), now: start)
        #expect(!machine.isQuiet(now: start + .milliseconds(499)))
        #expect(machine.isQuiet(now: start + .milliseconds(500)))
        _ = machine.frameReceived(try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#)), now: start + .milliseconds(600))
        #expect(!machine.isQuiet(now: start + .milliseconds(700)))
    }

    @Test("peer IDs compare byte-wise, not by locale")
    func byteWise() {
        // "Z" (0x5A) < "a" (0x61) byte-wise.
        #expect(TieBreak.newConnectionWins(existing: .inbound, new: .outbound, localPeerID: "Z", remotePeerID: "a"))
    }
}

@Suite("Back-off")
struct BackoffTests {
    @Test("delays double from the initial delay up to the cap, within the jitter band")
    func growth() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0.2)
        #expect(backoff.delay(attempt: 0, random: 0.5) == .milliseconds(100))
        #expect(backoff.delay(attempt: 1, random: 0.5) == .milliseconds(200))
        #expect(backoff.delay(attempt: 3, random: 0.5) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, random: 0.5) == .seconds(1))
        #expect(backoff.delay(attempt: 10, random: 0) == .milliseconds(800))
        #expect(backoff.delay(attempt: 10, random: 0.999999) <= .milliseconds(1200))
        #expect(backoff.delay(attempt: 10_000, random: 0.5) == .seconds(1))
    }
}

extension BackoffTests {
    @Test("the default redial back-off starts at 0.5 s and is capped at 30 s")
    func defaults() {
        let backoff = PeerConfiguration(serviceType: "chat").reconnectBackoff
        #expect(backoff.delay(attempt: 0, random: 0.5) == .milliseconds(500))
        #expect(backoff.delay(attempt: 5, random: 0.5) == .seconds(16))
        #expect(backoff.delay(attempt: 6, random: 0.5) == .seconds(30))
        #expect(backoff.delay(attempt: 100, random: 0.999) <= .seconds(36))
        // Ten seconds of a refusing peer: at most 5 attempts (0.5 + 1 + 2 + 4 s, jittered).
        var elapsed = Duration.zero
        var attempts = 0
        while elapsed < .seconds(10) {
            elapsed += backoff.delay(attempt: attempts, random: 0)
            attempts += 1
        }
        #expect(attempts <= 5)
    }
}

@Suite("Connection state machine: features and control frames")
struct ConnectionFeatureTests {
    typealias Machine = ConnectionStateMachine
    let base = ConnectionStateMachineTests()

    @Test("a hello's features survive the round trip through PeerKit's codec; an old hello has none")
    func helloFeatures() throws {
        var machine = base.machine()
        _ = machine.activated(now: base.start)
        var modern = base.remote
        modern.features = ["groups", "resources"]
        #expect(machine.frameReceived(try base.helloEnvelope(modern), now: base.start) == .established(modern))

        var old = base.machine()
        _ = old.activated(now: base.start)
        let action = old.frameReceived(try base.envelope(#"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"B","name":"beta","serviceType":"chat"}}"#), now: base.start)
        guard case let .established(hello) = action else {
            Issue.record("an old hello was not accepted: \(action)")
            return
        }
        #expect(hello.features == nil)
        #expect(!hello.supports("groups"))
    }

    @Test("the hello is written in the documented key order, discovery info sorted, features last")
    func helloBytes() {
        let hello = Hello(peerID: "P", name: "n", serviceType: "chat", discoveryInfo: ["z": "1", "a": "2"], features: ["groups"])
        var frame = Machine.ControlFrame.hello(hello).encode()
        _ = frame.readInteger(as: UInt32.self)
        #expect(String(buffer: frame) == #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"P","name":"n","serviceType":"chat","discoveryInfo":{"a":"2","z":"1"},"features":["groups"]}}"#)
    }

    @Test("every control frame decodes back to what was encoded, with one codec")
    func controlRoundTrip() throws {
        func body(_ frame: Machine.ControlFrame) throws -> Envelope {
            var bytes = frame.encode()
            _ = bytes.readInteger(as: UInt32.self)
            return try EnvelopeParser.parse(bytes)
        }
        #expect(try body(.bye(reason: "duplicate connection")).decodePayload(Bye.self) == Bye(reason: "duplicate connection"))
        #expect(try body(.bye(reason: nil)).decodePayload(Bye.self) == Bye(reason: nil))
        let error = try body(.error(reason: "No \"handler\"\n", replyTo: "7"))
        #expect(error.replyTo == "7")
        #expect(try error.decodePayload(ErrorPayload.self) == ErrorPayload(reason: "No \"handler\"\n"))
        #expect(try body(.rename(name: "Küche #2")).decodePayload(Rename.self) == Rename(name: "Küche #2"))
        let ping = try body(.ping(id: "ping-3"))
        #expect(ping.id == "ping-3" && String(buffer: ping.payload) == "{}")
    }

    @Test("a feature's control frame is passed up while open and while a retired duplicate delivers; unknown ones are ignored")
    func passedUp() throws {
        var machine = try base.established()
        let groups = try base.envelope(#"{"type":"peerkit.groups","payload":{"version":1,"groups":["a"]}}"#)
        #expect(machine.frameReceived(groups, now: base.start) == .deliver(groups))
        #expect(machine.frameReceived(try base.envelope(#"{"type":"peerkit.future","payload":{}}"#), now: base.start) == .none)
        _ = machine.closeRequested(.duplicate)
        #expect(machine.frameReceived(groups, now: base.start) == .deliver(groups))
        #expect(machine.frameReceived(try base.envelope(#"{"type":"peerkit.ping","id":"x","payload":{}}"#), now: base.start) == .none)
    }

    @Test("a failure found above the connection layer closes it with peerkit.error, once")
    func failureFromAbove() throws {
        var machine = try base.established()
        let failure = Machine.Failure.limitExceeded("its peerkit.groups lists 65 groups, over the limit of 64")
        #expect(machine.closeRequested(.failed(failure)) == base.failed(failure))
        #expect(machine.isEnding)
        #expect(machine.closeRequested(.failed(failure)) == .none)
        #expect(Machine.CloseReason.failed(failure).error(peer: "peer \"b\"") == .peerExceededLimit(peer: "peer \"b\"", reason: failure.reason))
    }
}
