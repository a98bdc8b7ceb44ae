import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import PeerKit

/// Every state and transition of ``PeerStateMachine``, with plain values: no sockets, no clock.
@Suite("Peer state machine (no I/O)")
struct PeerStateMachineTests {
    typealias Connection = NamedConnection

    typealias Machine = PeerStateMachine<Connection, String>

    /// "a" is smaller than "b": a's outbound connection wins, seen from a; b's inbound, seen from b.
    static let local = "a", remote = "b"

    func frame(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    func established(_ machine: inout Machine, _ connection: Connection, _ direction: TieBreak.Direction) -> Machine.Established {
        machine.established(connection, direction: direction, localPeerID: Self.local, remotePeerID: Self.remote)
    }

    func texts(_ frames: CircularBuffer<ByteBuffer>) -> [String] { frames.map { String(buffer: $0) } }

    // MARK: idle and connected

    @Test("an idle peer is not connected and routes nothing")
    func idle() {
        var machine = Machine()
        #expect(!machine.isConnected)
        #expect(machine.current == nil)
        guard case .notConnected = machine.route(frame("x"), limit: 100) else { Issue.record("routed"); return }
        #expect(machine.wait("w") == .now)
    }

    @Test("the first connection makes the peer connected, and frames go to it")
    func firstConnection() {
        var machine = Machine()
        let c = Connection("c")
        #expect(established(&machine, c, .outbound) == .connected)
        #expect(machine.isConnected)
        #expect(machine.current === c)
        guard case let .send(to) = machine.route(frame("x"), limit: 100) else { Issue.record("not sent"); return }
        #expect(to === c)
    }

    @Test("a connection that closes other than by a tie-break's bye disconnects the peer")
    func closedDisconnects() {
        var machine = Machine()
        let c = Connection("c")
        _ = established(&machine, c, .outbound)
        #expect(machine.closed(c, byeDuplicate: false) == .disconnected)
        #expect(!machine.isConnected)
        #expect(machine.closed(c, byeDuplicate: false) == .ignored)
    }

    // MARK: tie-break, both orders

    @Test("a second connection that wins the tie-break takes over and the first is retired")
    func newWins() {
        var machine = Machine()
        let inbound = Connection("in"), outbound = Connection("out")
        _ = established(&machine, inbound, .inbound)
        // Seen from "a" (the smaller ID), the connection it dialled wins.
        guard case let .retire(loser, peerLostIt) = established(&machine, outbound, .outbound) else { Issue.record("no retire"); return }
        #expect(loser === inbound)
        #expect(peerLostIt == false, "the plain rule retired it")
        #expect(machine.current === outbound)
        #expect(machine.isConnected)
        // The loser closing changes nothing for the peer; once its socket closed it is gone.
        #expect(machine.closed(inbound, byeDuplicate: false) == .ignored)
        #expect(machine.current === outbound)
        let last = machine.finished(inbound)
        #expect(last)
        #expect(machine.retiring.isEmpty)
    }

    @Test("a second connection that loses the tie-break is retired and the first stays")
    func newLoses() {
        var machine = Machine()
        let inbound = Connection("in"), outbound = Connection("out")
        _ = established(&machine, outbound, .outbound)
        guard case let .retire(loser, peerLostIt) = established(&machine, inbound, .inbound) else { Issue.record("no retire"); return }
        #expect(loser === inbound)
        #expect(peerLostIt == false, "the new one lost")
        #expect(machine.current === outbound)
    }

    @Test("a new connection replaces a quiet one even where the tie-break would keep the quiet one")
    func quietLoses() {
        var machine = Machine()
        let outbound = Connection("out"), inbound = Connection("in")
        _ = established(&machine, outbound, .outbound)
        // Seen from "a", its own outbound connection would win; but it went quiet: "b" lost it
        // (an address changed) and dialled again.
        guard case let .retire(loser, peerLostIt) = machine.established(inbound, direction: .inbound, localPeerID: Self.local, remotePeerID: Self.remote, presumedLost: { $0 === outbound }) else {
            Issue.record("no retire"); return
        }
        #expect(loser === outbound)
        #expect(peerLostIt == true, "it lost because it was presumed lost")
        #expect(machine.current === inbound)
        #expect(machine.isConnected)
    }

    @Test("a peer that lost the connection and dialled again is followed on both sides, though the old one is not quiet where it survives")
    func olderConnectionLosesOnBothSides() {
        // Seen on the simulated LAN: b ("b" > "a") lost its address, so the connection a dialled
        // died for b alone (b's pings still reached a). b timed it out and dialled a again; on a,
        // the old connection was not quiet and a's own dial, so the plain rule kept it, b got
        // a's bye on its new connection and waited for a winner that b had already closed. With
        // the old connection a heartbeat interval older than the new one, both keep the new one.
        let interval = TimeAmount.milliseconds(1250)
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let old = Connection("a→b"), new = Connection("b→a")
        let establishedAt = [ObjectIdentifier(old): t0, ObjectIdentifier(new): t0 + .seconds(3)]
        func lost(_ connection: Connection) -> Bool {
            TieBreak.presumedLost(quiet: false, establishedAt: establishedAt[ObjectIdentifier(connection)], now: t0 + .seconds(3), heartbeatInterval: interval)
        }
        var a = Machine()
        _ = a.established(old, direction: .outbound, localPeerID: "a", remotePeerID: "b")
        guard case let .retire(loser, peerLostIt) = a.established(new, direction: .inbound, localPeerID: "a", remotePeerID: "b", presumedLost: lost) else {
            Issue.record("no retire"); return
        }
        #expect(loser === old)
        #expect(peerLostIt == true, "it lost because it was presumed lost")
        #expect(a.current === new)
        // Without its age, the old one wins on a: the plain rule, a's own dial.
        var plain = Machine()
        _ = plain.established(old, direction: .outbound, localPeerID: "a", remotePeerID: "b")
        _ = plain.established(new, direction: .inbound, localPeerID: "a", remotePeerID: "b")
        #expect(plain.current === old)
        // Had b still held the old one, it would keep the new one too.
        var b = Machine()
        _ = b.established(old, direction: .inbound, localPeerID: "b", remotePeerID: "a")
        _ = b.established(new, direction: .outbound, localPeerID: "b", remotePeerID: "a", presumedLost: lost)
        #expect(b.current === new)
    }

    @Test("both sides keep the same connection whichever completes first")
    func bothSidesAgree() {
        // Peer a and peer b each see the connection a dialled (a's outbound, b's inbound).
        for aFirst in [true, false] {
            for bFirst in [true, false] {
                var a = Machine(), b = Machine()
                let dialledByA = Connection("a→b"), dialledByB = Connection("b→a")
                let aOrder: [(Connection, TieBreak.Direction)] = aFirst ? [(dialledByA, .outbound), (dialledByB, .inbound)] : [(dialledByB, .inbound), (dialledByA, .outbound)]
                let bOrder: [(Connection, TieBreak.Direction)] = bFirst ? [(dialledByA, .inbound), (dialledByB, .outbound)] : [(dialledByB, .outbound), (dialledByA, .inbound)]
                for (c, d) in aOrder { _ = a.established(c, direction: d, localPeerID: "a", remotePeerID: "b") }
                for (c, d) in bOrder { _ = b.established(c, direction: d, localPeerID: "b", remotePeerID: "a") }
                #expect(a.current === dialledByA)
                #expect(b.current === dialledByA)
            }
        }
    }

    // MARK: switching

    @Test("the peer's bye on the connection in use starts a switch: the peer stays connected and frames are held")
    func switchHolds() {
        var machine = Machine()
        let old = Connection("old")
        _ = established(&machine, old, .inbound)
        #expect(machine.closed(old, byeDuplicate: true) == .switching(generation: 1))
        #expect(machine.isConnected)
        #expect(machine.isSwitching)
        #expect(machine.current == nil)
        guard case .held = machine.route(frame("1"), limit: 100) else { Issue.record("not held"); return }
        guard case .held = machine.route(frame("2"), limit: 100) else { Issue.record("not held"); return }
        #expect(machine.heldBytes == 2)
    }

    @Test("the winner arriving ends the switch: held frames go to it first, then later frames, in order")
    func switchEndsInOrder() {
        var machine = Machine()
        let old = Connection("old"), winner = Connection("winner")
        _ = established(&machine, old, .inbound)
        _ = machine.closed(old, byeDuplicate: true)
        _ = machine.route(frame("1"), limit: 100)
        #expect(machine.wait("sender") == .waiting)
        guard case let .switched(waiters, generation) = established(&machine, winner, .outbound) else { Issue.record("no switch"); return }
        #expect(waiters == ["sender"])
        #expect(generation == 1)
        // Flushing: a frame sent now joins the hold behind the held ones.
        guard case .held = machine.route(frame("2"), limit: 100) else { Issue.record("overtook"); return }
        #expect(machine.current === winner)
        let first = machine.takeHeldFrames(for: winner)
        #expect(texts(first.frames) == ["1", "2"])
        _ = machine.route(frame("3"), limit: 100)
        #expect(texts(machine.takeHeldFrames(for: winner).frames) == ["3"])
        // Nothing left: connected to the winner, frames go straight to it.
        let last = machine.takeHeldFrames(for: winner)
        #expect(last.frames.isEmpty)
        guard case let .send(to) = machine.route(frame("4"), limit: 100) else { Issue.record("not sent"); return }
        #expect(to === winner)
        #expect(!machine.isSwitching)
    }

    @Test("a sender waiting for room in a full hold is resumed when the held frames have moved")
    func fullHold() {
        var machine = Machine()
        let old = Connection("old"), winner = Connection("winner")
        _ = established(&machine, old, .inbound)
        _ = machine.closed(old, byeDuplicate: true)
        // One frame always fits (the limit plus one frame); the next is refused.
        guard case .held = machine.route(frame("0123456789"), limit: 4) else { Issue.record("not held"); return }
        guard case .full = machine.route(frame("x"), limit: 4) else { Issue.record("not full"); return }
        #expect(machine.wait("w") == .waiting)
        guard case let .switched(waiters, _) = established(&machine, winner, .outbound) else { Issue.record("no switch"); return }
        #expect(waiters == ["w"])
        #expect(machine.waiterCount == 0)
        guard case .full = machine.route(frame("y"), limit: 4) else { Issue.record("hold not full while flushing"); return }
        #expect(machine.wait("v") == .waiting)
        #expect(texts(machine.takeHeldFrames(for: winner).frames) == ["0123456789"])
        let done = machine.takeHeldFrames(for: winner)
        #expect(done.frames.isEmpty)
        #expect(done.waiters == ["v"])
    }

    @Test("what a switch holds is charged to the budget until it moves to the winner, frames held while it moves too")
    func holdIsChargedUntilMoved() {
        let budget = OutboundBudget(limit: 1000)
        var machine = Machine()
        let old = Connection("old"), winner = Connection("winner")
        _ = established(&machine, old, .inbound)
        _ = machine.closed(old, byeDuplicate: true, charge: { OutboundBudget.Share(budget: budget) })
        _ = machine.route(frame("0123456789"), limit: 100)
        _ = machine.route(frame("abc"), limit: 100)
        #expect(budget.total == 13)
        _ = established(&machine, winner, .outbound)
        #expect(texts(machine.takeHeldFrames(for: winner).frames) == ["0123456789", "abc"])
        #expect(budget.total == 0, "taken out for the winner: its outbox charges them now")
        // Sent while the held frames move: held behind them, and charged.
        _ = machine.route(frame("late"), limit: 100)
        #expect(budget.total == 4)
        #expect(texts(machine.takeHeldFrames(for: winner).frames) == ["late"])
        #expect(budget.total == 0)
        #expect(machine.takeHeldFrames(for: winner).frames.isEmpty)
        #expect(budget.total == 0)
    }

    @Test("a hold dropped because the winner never came, or because the peer was abandoned, gives its charge back")
    func droppedHoldGivesItsChargeBack() {
        let budget = OutboundBudget(limit: 10)
        var wakes = 0
        let counter = NIOLockedValueBox(0)
        for ending in ["grace", "abandon", "stop"] {
            var machine = Machine()
            let old = Connection("old")
            _ = established(&machine, old, .inbound)
            guard case let .switching(generation) = machine.closed(old, byeDuplicate: true, charge: {
                OutboundBudget.Share(budget: budget) { counter.withLockedValue { $0 += 1 } }
            }) else { Issue.record("no switch"); return }
            // Over the budget: held anyway (one frame always fits the peer's own limit).
            _ = machine.route(frame("0123456789ab"), limit: 100)
            #expect(budget.isSpent, "\(ending)")
            switch ending {
            case "grace": _ = machine.graceExpired(generation: generation)
            case "abandon": _ = machine.abandon()
            default: _ = machine.stop()
            }
            #expect(budget.total == 0, "\(ending): the dropped hold gave its charge back")
            wakes += 1
            #expect(counter.withLockedValue { $0 } == wakes, "\(ending): the peers held back were told")
        }
    }

    @Test("the grace period running out without a winner disconnects the peer and releases its waiters")
    func graceExpires() {
        var machine = Machine()
        let old = Connection("old")
        _ = established(&machine, old, .inbound)
        guard case let .switching(generation) = machine.closed(old, byeDuplicate: true) else { Issue.record("no switch"); return }
        _ = machine.wait("w")
        #expect(machine.graceExpired(generation: generation + 1) == nil)
        #expect(machine.graceExpired(generation: generation) == ["w"])
        #expect(!machine.isConnected)
        #expect(machine.graceExpired(generation: generation) == nil)
    }

    @Test("an earlier switch's grace timer does not end a later switch")
    func staleGrace() {
        var machine = Machine()
        let c1 = Connection("1"), c2 = Connection("2"), c3 = Connection("3")
        _ = established(&machine, c1, .inbound)
        guard case let .switching(first) = machine.closed(c1, byeDuplicate: true) else { Issue.record("no switch"); return }
        _ = established(&machine, c2, .outbound)
        _ = machine.takeHeldFrames(for: c2)
        guard case let .switching(second) = machine.closed(c2, byeDuplicate: true) else { Issue.record("no second switch"); return }
        #expect(first != second)
        #expect(machine.graceExpired(generation: first) == nil)
        #expect(machine.isSwitching)
        _ = established(&machine, c3, .outbound)
        #expect(machine.current === c3)
    }

    @Test("the winner closing while held frames move to it starts another switch that keeps them")
    func closedWhileFlushing() {
        var machine = Machine()
        let old = Connection("old"), winner = Connection("winner"), third = Connection("third")
        _ = established(&machine, old, .inbound)
        _ = machine.closed(old, byeDuplicate: true)
        _ = machine.route(frame("1"), limit: 100)
        _ = established(&machine, winner, .outbound)
        #expect(machine.closed(winner, byeDuplicate: true) == .switching(generation: 2))
        #expect(machine.heldBytes == 1)
        _ = established(&machine, third, .outbound)
        #expect(texts(machine.takeHeldFrames(for: third).frames) == ["1"])
    }

    @Test("the winner failing while held frames move to it disconnects the peer")
    func failedWhileFlushing() {
        var machine = Machine()
        let old = Connection("old"), winner = Connection("winner")
        _ = established(&machine, old, .inbound)
        _ = machine.closed(old, byeDuplicate: true)
        _ = established(&machine, winner, .outbound)
        #expect(machine.closed(winner, byeDuplicate: false) == .disconnected)
        #expect(!machine.isConnected)
        #expect(machine.takeHeldFrames(for: winner).frames.isEmpty)
    }

    @Test("a third connection while held frames move follows the tie-break, and what is held goes to the survivor")
    func thirdWhileFlushing() {
        var machine = Machine()
        let old = Connection("old"), inbound = Connection("in"), outbound = Connection("out")
        _ = established(&machine, old, .inbound)
        _ = machine.closed(old, byeDuplicate: true)
        _ = machine.route(frame("1"), limit: 100)
        _ = established(&machine, inbound, .inbound)
        guard case let .retire(loser, peerLostIt) = established(&machine, outbound, .outbound) else { Issue.record("no retire"); return }
        #expect(loser === inbound)
        #expect(peerLostIt == false, "the plain rule retired it")
        #expect(texts(machine.takeHeldFrames(for: outbound).frames) == ["1"])
        #expect(machine.takeHeldFrames(for: inbound).frames.isEmpty)
    }

    @Test("abandoning a switch whose hold overflowed disconnects the peer")
    func abandon() {
        var machine = Machine()
        let old = Connection("old")
        _ = established(&machine, old, .inbound)
        #expect(machine.abandon().isEmpty)  // not switching: nothing happens
        #expect(machine.isConnected)
        _ = machine.closed(old, byeDuplicate: true)
        _ = machine.wait("w")
        #expect(machine.abandon() == ["w"])
        #expect(!machine.isConnected)
    }

    @Test("stopping forgets the connection, the retiring ones and the waiters")
    func stop() {
        var machine = Machine()
        let c = Connection("c"), d = Connection("d")
        _ = established(&machine, c, .inbound)
        _ = established(&machine, d, .outbound)
        _ = machine.closed(d, byeDuplicate: true)
        _ = machine.wait("w")
        #expect(machine.stop() == ["w"])
        #expect(!machine.isConnected)
        #expect(machine.retiring.isEmpty)
    }

    // MARK: inbound order

    @Test("messages without a session number on the winner wait while the peer may still write on the loser")
    func inboundHeldUntilLoserCloses() {
        var machine = Machine()
        let inbound = Connection("in"), outbound = Connection("out")
        _ = established(&machine, inbound, .inbound)
        #expect(!machine.holdsInbound(from: inbound))
        _ = established(&machine, outbound, .outbound)
        #expect(machine.holdsInbound(from: outbound))
        #expect(!machine.holdsInbound(from: inbound))  // the loser's own messages come first
        // Its close starting (the bye) is not enough: the peer may still be writing on it.
        #expect(machine.closed(inbound, byeDuplicate: false) == .ignored)
        #expect(machine.holdsInbound(from: outbound))
        let last = machine.finished(inbound)
        #expect(last)
        #expect(!machine.holdsInbound(from: outbound))
    }
}

extension PeerStateMachine.Established: Equatable where Waiter: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.connected, .connected): return true
        case let (.retire(a, aLost), .retire(b, bLost)): return a === b && aLost == bLost
        case let (.switched(a, g), .switched(b, h)): return a == b && g == h
        default: return false
        }
    }
}

