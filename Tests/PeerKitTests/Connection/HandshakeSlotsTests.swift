import NIOCore
import Testing
@testable import PeerKit

@Suite("Handshake slots")
struct HandshakeSlotsTests {
    typealias Slots = HandshakeSlots<Int, Int>

    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func at(_ milliseconds: Int64) -> NIODeadline { start + .milliseconds(milliseconds) }

    /// Admits connections 1, 2, … from `sources`, in order, at 1 ms, 2 ms, …; connection n's
    /// handle is 100 + n.
    func admit(_ sources: [String], to slots: inout Slots) {
        for (index, source) in sources.enumerated() {
            _ = slots.admit(index + 1, handle: index + 101, from: source, now: at(Int64(index + 1)))
        }
    }

    @Test("a source with its limit of pending handshakes is refused, and other sources are still admitted")
    func perSourceLimit() {
        var slots = Slots(limits: .init(total: 64, perSource: 8))
        for id in 0..<8 {
            let decision = slots.admit(id, handle: id, from: "10.0.0.2", now: at(Int64(id))).0
            #expect(decision == .admit)
        }
        let (refused, report) = slots.admit(8, handle: 8, from: "10.0.0.2", now: at(10))
        #expect(refused == .refuse)
        #expect(report == .episodeStarted("Refusing new connections from 10.0.0.2: 8 of its connections are in their handshake, the limit per address (PeerConfiguration.maximumPendingHandshakesPerAddress). Connections from other addresses are still accepted; counts follow every 10 s while this goes on."))
        let outcome1 = slots.admit(9, handle: 9, from: "10.0.0.3", now: at(11)).0
        #expect(outcome1 == .admit)
        #expect(slots.count == 9)
        // A completed handshake frees its source's slot.
        slots.completed(3)
        let outcome2 = slots.admit(10, handle: 10, from: "10.0.0.2", now: at(12)).0
        #expect(outcome2 == .admit)
    }

    @Test("when every slot is taken, the oldest pending handshake of the busiest source is evicted, not the new connection refused")
    func evictsOldestOfBusiestSource() {
        var slots = Slots(limits: .init(total: 6, perSource: 3))
        // Two attacker addresses with 3 each hold every slot; the one of .3 started first.
        admit(["10.0.0.3", "10.0.0.2", "10.0.0.2", "10.0.0.3", "10.0.0.2", "10.0.0.3"], to: &slots)
        let (decision, report) = slots.admit(7, handle: 107, from: "192.168.1.9", now: at(7))
        #expect(decision == .admitEvicting(101))
        #expect(report.map { if case let .episodeStarted(line) = $0 { line.hasPrefix("Evicting pending handshakes: all 6 slots") } else { false } } == true)
        #expect(!slots.contains(1) && slots.contains(7) && slots.count == 6)
        #expect(slots.wasEvicted(1))
        // Now .2 is the busiest (3 against 2): its oldest goes next.
        let outcome3 = slots.admit(8, handle: 108, from: "192.168.1.10", now: at(8)).0
        #expect(outcome3 == .admitEvicting(102))
    }

    @Test("when every slot is taken, a connection from an address that holds as many pending handshakes as the busiest is refused at once instead of swapping one of its own for another")
    func busiestSourceDoesNotChurn() {
        var slots = Slots(limits: .init(total: 4, perSource: 3))
        admit(["10.0.0.2", "10.0.0.3", "10.0.0.2", "10.0.0.3"], to: &slots)
        // Both hold 2: a third from either would only swap.
        let (refused, report) = slots.admit(5, handle: 105, from: "10.0.0.2", now: at(5))
        #expect(refused == .refuse)
        #expect(report == .episodeStarted("Refusing new connections from 10.0.0.2: all 4 slots (PeerConfiguration.maximumPendingHandshakes) are held by connections in their handshake, and 2 of them are its own, as many as any address holds. A connection from an address with fewer evicts the oldest one of the busiest. Counts follow every 10 s while this goes on."))
        #expect(slots.count == 4 && !slots.contains(5))
        // An address with fewer (none) still evicts the oldest of the busiest.
        let admitted = slots.admit(6, handle: 106, from: "192.168.1.9", now: at(6)).0
        #expect(admitted == .admitEvicting(101))
        // Now .3 (2) is busier than .2 (1): a connection from .2 evicts from .3.
        let fairer = slots.admit(7, handle: 107, from: "10.0.0.2", now: at(7)).0
        #expect(fairer == .admitEvicting(102))
    }

    @Test("a real client from another address is never evicted while an attacker re-opens its stalled connections as fast as they are closed")
    func clientSurvivesChurn() {
        var slots = Slots(limits: .init(total: 64, perSource: 8))
        // 2,000 stalled connections from 16 addresses, each re-opened as soon as it is evicted
        // or refused; the client connects in the middle of it.
        var next = 0
        var evicted = 0
        var refused = 0
        func attack(_ count: Int, from first: Int64) {
            for step in 0..<count {
                let id = next
                next += 1
                switch slots.admit(id, handle: id, from: "10.0.0.\(2 + id % 16)", now: at(first + Int64(step))).0 {
                case .admit: break
                case .admitEvicting: evicted += 1
                case .refuse: refused += 1
                }
            }
        }
        attack(2000, from: 0)
        let client = -1
        let outcome4 = slots.admit(client, handle: client, from: "127.0.0.1", now: at(2000)).0
        #expect(outcome4 != .refuse)
        attack(20_000, from: 2001)
        #expect(slots.contains(client), "the client was evicted after \(evicted) evictions and \(refused) refusals")
        #expect(slots.count == 64)
        #expect(slots.pending(from: "10.0.0.2") <= 8)
    }

    @Test("an evicted connection's close is told apart from a failed handshake, and frees nothing twice")
    func evictedClose() {
        var slots = Slots(limits: .init(total: 1, perSource: 1))
        _ = slots.admit(1, handle: 1, from: "10.0.0.2", now: at(0))
        let outcome5 = slots.admit(2, handle: 2, from: "10.0.0.3", now: at(1)).0
        #expect(outcome5 == .admitEvicting(1))
        let outcome6 = slots.closed(1)
        #expect(outcome6 == true)
        let outcome7 = slots.closed(1)
        #expect(outcome7 == false)
        #expect(slots.contains(2) && slots.count == 1)
        let outcome8 = slots.closed(2)
        #expect(outcome8 == false)
        #expect(slots.count == 0)
    }

    @Test("an episode is logged by its first line, then by one line with counts per interval while it goes on, then ends")
    func episodeLog() {
        var slots = Slots(limits: .init(total: 2, perSource: 1))
        // First event: a line of its own.
        _ = slots.admit(1, handle: 1, from: "10.0.0.2", now: at(0))
        let first = slots.admit(2, handle: 2, from: "10.0.0.2", now: at(1)).1
        #expect(first != nil)
        // 1,500 more refusals and 2 evictions: no line each.
        var reports = 0
        for id in 3..<1503 where slots.admit(id, handle: id, from: "10.0.0.2", now: at(Int64(id))).1 != nil { reports += 1 }
        _ = slots.admit(2000, handle: 2000, from: "10.0.0.3", now: at(2000))
        for id in 2001..<2003 where slots.admit(id, handle: id, from: "10.0.0.\(id)", now: at(Int64(id))).1 != nil { reports += 1 }
        if slots.failed(from: "10.0.0.9", reason: "it timed out") != nil { reports += 1 }
        #expect(reports == 0)
        let outcome9 = slots.summary()
        #expect(outcome9 == "In the last 10 s, 2 connections stalled in their handshake were evicted to make room for new ones (PeerConfiguration.maximumPendingHandshakes), 1,500 connections were refused because their address had too many handshakes pending (PeerConfiguration.maximumPendingHandshakesPerAddress), 1 connection failed their handshake (1: it timed out); most from 10.0.0.2 (1,501), the rest from 2 other addresses.")
        // A quiet interval ends the episode; the next event starts another, with its own line.
        let outcome10 = slots.summary()
        #expect(outcome10 == nil)
        let outcome11 = slots.summary()
        #expect(outcome11 == nil)
        let outcome12 = slots.failed(from: nil, reason: "it sent nothing")
        #expect(outcome12 == .episodeStarted("A connection from an unknown address failed its handshake: it sent nothing. Further handshake failures are counted, with one line every 10 s while they go on."))
    }

    @Test("connections from unknown addresses count only against the total")
    func unknownSources() {
        var slots = Slots(limits: .init(total: 3, perSource: 1))
        let outcome13 = slots.admit(1, handle: 1, from: nil, now: at(0)).0
        #expect(outcome13 == .admit)
        let outcome14 = slots.admit(2, handle: 2, from: nil, now: at(1)).0
        #expect(outcome14 == .admit)
        let outcome15 = slots.admit(3, handle: 3, from: nil, now: at(2)).0
        #expect(outcome15 == .admit)
        let outcome16 = slots.admit(4, handle: 4, from: nil, now: at(3)).0
        #expect(outcome16 == .admitEvicting(1))
    }

    @Test("sources: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 by its /64 prefix, a Unix socket as unknown")
    func sources() throws {
        #expect(Slots.source(of: try SocketAddress(ipAddress: "192.168.1.20", port: 4000)) == "192.168.1.20")
        #expect(Slots.source(of: try SocketAddress(ipAddress: "::ffff:127.0.0.1", port: 4000)) == "127.0.0.1")
        #expect(Slots.source(of: try SocketAddress(ipAddress: "2001:db8:1:2:aaaa:bbbb:cccc:dddd", port: 4000)) == "2001:db8:1:2::/64")
        #expect(Slots.source(of: try SocketAddress(ipAddress: "2001:db8:1:2::99", port: 4000)) == "2001:db8:1:2::/64")
        #expect(Slots.source(of: try SocketAddress(unixDomainSocketPath: "/tmp/x")) == nil)
        #expect(Slots.source(of: nil) == nil)
    }

    @Test("numbers are grouped by thousands")
    func grouping() {
        #expect(Slots.grouped(0) == "0")
        #expect(Slots.grouped(999) == "999")
        #expect(Slots.grouped(1234) == "1,234")
        #expect(Slots.grouped(1_234_567) == "1,234,567")
    }
}
