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
}
