import Synchronization
import Testing
@testable import PeerKit

/// The process-wide bound on what all connections hold queued to send.
@Suite("The outbound budget")
struct OutboundBudgetTests {
    @Test("the budget is spent at its limit, and says when a release brings it below the limit, once")
    func spentAndReleased() {
        let budget = OutboundBudget(limit: 1000)
        budget.added(600)
        #expect(!budget.isSpent)
        budget.added(400)
        #expect(budget.isSpent, "at the limit: spent")
        #expect(budget.total == 1000)
        #expect(budget.removed(1) == true, "from spent to below the limit")
        #expect(budget.removed(100) == false, "already below: nothing new to say")
        budget.added(500)
        #expect(budget.isSpent)
        #expect(budget.removed(200) == false, "still over the limit")
        #expect(budget.removed(300) == true)
        #expect(budget.total == 899)
    }

    @Test("the heartbeats judge peers while the budget is spent or within a sixteenth of it, at most a megabyte: a dip of a frame does not count as room")
    func nearlySpent() {
        let small = OutboundBudget(limit: 1600)
        small.added(1499)
        #expect(!small.isNearlySpent)
        small.added(1)
        #expect(small.isNearlySpent && !small.isSpent, "1500 of 1600: within a sixteenth")
        let large = OutboundBudget(limit: 128 << 20)
        large.added((127 << 20) - 1)
        #expect(!large.isNearlySpent)
        large.added(1)
        #expect(large.isNearlySpent, "within a megabyte of 128 MiB")
    }

    @Test("a session's share adds to the budget and takes off it; it wakes the held-back peers when the budget falls below its limit or the share empties under a spent budget, and gives back what it still holds when released")
    func share() {
        let budget = OutboundBudget(limit: 1000)
        let wakes = Atomic<Int>(0)
        let other = OutboundBudget.Share(budget: budget)
        do {
            let share = OutboundBudget.Share(budget: budget) { wakes.add(1, ordering: .relaxed) }
            share.added(600)
            other.added(300)
            #expect(share.bytes == 600 && budget.total == 900)
            share.removed(100)
            #expect(wakes.load(ordering: .relaxed) == 0, "the budget was not spent")
            share.added(300)
            #expect(budget.isSpent)
            share.removed(200)
            #expect(wakes.load(ordering: .relaxed) == 1, "below the limit again")
            share.added(200)
            #expect(budget.total == 1100 && share.bytes == 800)
            share.removed(50)
            #expect(wakes.load(ordering: .relaxed) == 1, "still spent, and the share holds more")
            #expect(budget.total == 1050)
        }
        #expect(budget.total == 300, "released with 750 held: given back")
        #expect(wakes.load(ordering: .relaxed) == 2, "which took the budget below its limit")
        other.removed(300)
        #expect(budget.total == 0)
    }

    @Test("a share emptied while another peer keeps the budget spent wakes the held-back peers: this one may run its handlers again")
    func shareEmptiedUnderSpentBudget() {
        let budget = OutboundBudget(limit: 1000)
        let wakes = Atomic<Int>(0)
        let hog = OutboundBudget.Share(budget: budget)
        let share = OutboundBudget.Share(budget: budget) { wakes.add(1, ordering: .relaxed) }
        hog.added(1200)
        share.added(100)
        share.removed(100)
        #expect(budget.isSpent && wakes.load(ordering: .relaxed) == 1)
        hog.removed(1200)
    }
}
