import NIOConcurrencyHelpers
@testable import PeerKit
import PeerKitTesting
import Testing

extension TestNetworkSuites {
/// Two transceivers started together on a ``TestNetwork`` find each other at once and both dial,
/// so every pair here goes through a tie-break; each side sends, broadcasts and requests from the
/// moment its `peerConnected` arrives, while the loser may still be open. One event loop and a test
/// clock; only whether both dial before either's handshake completes depends on when the test's
/// tasks get a thread, so a run without a tie-break is repeated (at most 5 runs).
@Suite("The tie-break on a test network")
struct TieBreakOnTestNetworkTests {
    struct Ask: Codable, Sendable { var n: Int }
    struct Answer: Codable, Sendable { var n: Int }

    final class Received: Sendable {
        let numbers = NIOLockedValueBox<[Int]>([])
        let failures = NIOLockedValueBox<[String]>([])
    }

    @Test("sends, broadcasts and requests made while the tie-break is under way arrive once, in order, and every request is answered", arguments: [false, true])
    func sendDuringTieBreak(broadcasting: Bool) async throws {
        for _ in 1...5 {
            if try await tieBreaks(sendingDuringIt: broadcasting) > 0 { return }
        }
        Issue.record("the two did not dial each other at once in 5 runs")
    }

    /// One run: every message and answer checked; returns how many tie-breaks the two made.
    private func tieBreaks(sendingDuringIt broadcasting: Bool) async throws -> Int {
        let network = TestNetwork()
        let alice = try await network.startTransceiver(named: "alice")
        let bob = try await network.startTransceiver(named: "bob")
        var boxes: [String: Received] = [:]
        for transceiver in [alice, bob] {
            let box = Received()
            boxes[transceiver.configuration.peerName] = box
            transceiver.receive(Numbered.self) { message in box.numbers.withLockedValue { $0.append(message.n) } }
            transceiver.respond(to: Ask.self) { ask, _ in Answer(n: ask.n) }
        }
        let received = boxes
        // Each side starts the moment it sees the other connected.
        let work = [alice, bob].map { sender in
            Task.immediate {
                let box = try #require(received[sender.configuration.peerName])
                let peer = try await sender.waitForPeer(timeout: .seconds(30))
                for n in 0..<100 {
                    do {
                        if broadcasting { sender.broadcast(Numbered(n: n)) } else { try await sender.send(Numbered(n: n), to: [peer]) }
                        if n % 20 == 0 {
                            let answer = try await sender.request(Ask(n: n), to: peer, expecting: Answer.self, timeout: .seconds(5))
                            if answer.n != n { box.failures.withLockedValue { $0.append("request \(n) answered \(answer.n)") } }
                        }
                    } catch {
                        box.failures.withLockedValue { $0.append("\(n): \(error)") }
                    }
                }
            }
        }
        try await network.eventually("both sides received 100 messages") {
            received.values.allSatisfy { $0.numbers.withLockedValue { $0.count } >= 100 }
        }
        for task in work { try await task.value }
        await network.settle()
        for (name, box) in received {
            #expect(box.numbers.withLockedValue { $0 } == Array(0..<100), "\(name) received out of order or twice")
            #expect(box.failures.withLockedValue { $0 }.isEmpty, "\(name): \(box.failures.withLockedValue { $0 })")
        }
        let tieBreaks = (alice.session?.manager.tieBreakCount() ?? 0) + (bob.session?.manager.tieBreakCount() ?? 0)
        await network.shutdown()
        return tieBreaks
    }
}
}
