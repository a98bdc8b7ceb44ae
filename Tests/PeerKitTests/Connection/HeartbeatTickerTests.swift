import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import PeerKit

/// The ticker on the real clock, driven by an `EmbeddedEventLoop` whose time the test sets: a
/// loop's timer is set for the grid tick at or after the earliest time its connections gave, and
/// the ticks in between do not happen at all.
@Suite("Heartbeat ticker: one timer per loop, woken only where a connection is due")
struct HeartbeatTickerTests {
    /// Uptime in milliseconds.
    static func at(_ milliseconds: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(milliseconds) * 1_000_000) }

    /// A connection's tick that records when it ran and how late, and asks for its next tick at
    /// the next time of `plan` (nil once the plan is used up).
    final class Member: Sendable {
        let calls = NIOLockedValueBox<[(now: Int64, late: Int64)]>([])
        let plan: NIOLockedValueBox<[NIODeadline?]>

        init(_ plan: [NIODeadline?]) { self.plan = NIOLockedValueBox(plan) }

        var times: [Int64] { calls.withLockedValue { $0.map(\.now) } }

        /// Registers this member's tick with `ticker` on `loop`.
        func register(with ticker: HeartbeatTicker, on loop: EmbeddedEventLoop) -> HeartbeatTicker.Registration {
            ticker.register(on: loop) { now, lateBy in
                self.calls.withLockedValue { $0.append((Int64(now.uptimeNanoseconds / 1_000_000), lateBy.nanoseconds / 1_000_000)) }
                return self.plan.withLockedValue { $0.isEmpty ? nil : $0.removeFirst() }
            }
        }
    }

    /// Runs `body` with an embedded loop set to `start` (ms of uptime) and a ticker every 250 ms.
    func withLoop(at start: Int64, _ body: (EmbeddedEventLoop, HeartbeatTicker) throws -> Void) throws {
        let loop = EmbeddedEventLoop()
        defer { try? loop.syncShutdownGracefully() }
        loop.advanceTime(to: Self.at(start))
        try body(loop, HeartbeatTicker(interval: .milliseconds(250)))
    }

    @Test("a connection is ticked at the first grid tick after it registered, then only at the grid tick at or after each time it gives")
    func ticksOnlyWhenDue() throws {
        try withLoop(at: 1_030) { loop, ticker in
            // Due at 2.4 s (a grid tick is every 250 ms: ticked at 2.5 s), then at exactly 3.0 s, then never.
            let member = Member([Self.at(2_400), Self.at(3_000), nil])
            let registration = member.register(with: ticker, on: loop)
            loop.advanceTime(to: Self.at(10_000))
            #expect(member.times == [1_250, 2_500, 3_000])
            registration.cancel()
        }
    }

    @Test("the loop's timer is set for the earliest due connection; the others are not ticked before their time")
    func earliestMemberSetsTheTimer() throws {
        try withLoop(at: 1_000) { loop, ticker in
            let slow = Member([Self.at(5_000), nil])
            let fast = Member([Self.at(1_500), Self.at(2_000), Self.at(2_010), nil])
            let registrations = [slow.register(with: ticker, on: loop), fast.register(with: ticker, on: loop)]
            loop.advanceTime(to: Self.at(6_000))
            #expect(fast.times == [1_250, 1_500, 2_000, 2_250])
            #expect(slow.times == [1_250, 5_000])
            for registration in registrations { registration.cancel() }
        }
    }

    @Test("a cancelled connection is not ticked again")
    func cancelled() throws {
        try withLoop(at: 1_000) { loop, ticker in
            let member = Member([Self.at(1_500), Self.at(1_750), Self.at(2_000)])
            let registration = member.register(with: ticker, on: loop)
            loop.advanceTime(to: Self.at(1_600))
            #expect(member.times == [1_250, 1_500])
            #expect(member.calls.withLockedValue { $0.map(\.late) } == [0, 0])
            registration.cancel()
            loop.advanceTime(to: Self.at(5_000))
            #expect(member.times == [1_250, 1_500])
        }
    }

    @Test("a connection can move its next tick earlier between ticks (a handshake that completed)")
    func movedEarlier() throws {
        try withLoop(at: 1_000) { loop, ticker in
            // Handshaking: next due at its 5 s deadline.
            let member = Member([Self.at(6_250), nil, nil])
            let registration = member.register(with: ticker, on: loop)
            loop.advanceTime(to: Self.at(1_300))
            #expect(member.times == [1_250])
            registration.due(Self.at(2_200))
            loop.advanceTime(to: Self.at(10_000))
            #expect(member.times == [1_250, 2_250])
            registration.cancel()
        }
    }

    @Test("the grid is the machine's uptime: loops made at different times tick at the same instants")
    func gridIsShared() throws {
        try withLoop(at: 1_030) { loop, first in
            let a = Member([Self.at(3_100), nil])
            let registrationA = a.register(with: first, on: loop)
            loop.advanceTime(to: Self.at(2_170))
            let second = HeartbeatTicker(interval: .milliseconds(250))
            let b = Member([Self.at(3_010), nil])
            let registrationB = b.register(with: second, on: loop)
            loop.advanceTime(to: Self.at(5_000))
            #expect(a.times == [1_250, 3_250])
            #expect(b.times == [2_250, 3_250])
            registrationA.cancel()
            registrationB.cancel()
        }
    }
}
