import NIOEmbedded
import Testing
@testable import PeerKit

/// How a connection counts the messages it hands to the dispatcher against its own inbound limit
/// and the transceiver's ``InboundBudget`` (no I/O).
@Suite("Inbound accounting")
struct InboundAccountingTests {
    func connection(limit: Int = 1 << 20, budget: InboundBudget? = nil) -> PeerConnection {
        PeerConnection(channel: EmbeddedChannel(), direction: .inbound, serviceKey: nil, maximumQueuedInboundBytes: limit, inboundBudget: budget)
    }

    @Test("a spent budget pauses a connection that hands on two messages at once, but not one whose single message is all it has waiting")
    func loneMessageUnderSpentBudget() {
        let budget = InboundBudget(limit: 1000)
        let other = connection(budget: budget)
        #expect(other.inboundAccepted(2000, messages: 3), "over the budget with three messages")

        let lone = connection(budget: budget)
        #expect(!lone.inboundAccepted(300, messages: 1), "its only message waiting: a peer that waits for each answer is still read")
        #expect(!lone.isReadingPaused)

        let burst = connection(budget: budget)
        #expect(burst.inboundAccepted(600, messages: 2), "two messages of one read are not alone")
        #expect(burst.isReadingPaused)
        #expect(budget.total == 2900)

        // The second message of a connection that already has one waiting is not alone either.
        #expect(lone.inboundAccepted(300, messages: 1))
    }

    @Test("a connection's own limit pauses it whatever the budget says, and it resumes at half the limit")
    func ownLimit() {
        let reader = connection(limit: 1000)
        #expect(!reader.inboundAccepted(900, messages: 4))
        #expect(reader.inboundAccepted(200, messages: 1), "1,100 bytes waiting, over 1,000")
        reader.inboundHandled(500)
        #expect(reader.isReadingPaused, "600 left: more than half the limit")
        reader.inboundHandled(100)
        #expect(!reader.isReadingPaused, "500 left: half the limit")
    }
}
