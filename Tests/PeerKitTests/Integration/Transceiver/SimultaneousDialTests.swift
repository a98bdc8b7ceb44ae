import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing
@testable import PeerKit

/// Two peers that find each other at the same moment (the normal case when two start together on a
/// LAN: both dial, one connection is retired) and send and request as soon as `waitForPeer`
/// returns: nothing a user sends is lost, duplicated or reordered while the connection beneath
/// changes. Real sockets on loopback; `PEERKIT_SIMULTANEOUS_DIAL_ROUNDS` pairs (default 10;
/// `make stress` runs 100 in debug and in release).
@Suite("Simultaneous dial over loopback TCP")
struct SimultaneousDialTests {
    struct Ask: Codable, Sendable { var n: Int }
    struct Answer: Codable, Sendable { var n: Int; var from: String }

    static let messages = 200
    static let requests = 10

    static var rounds: Int {
        ProcessInfo.processInfo.environment["PEERKIT_SIMULTANEOUS_DIAL_ROUNDS"].flatMap(Int.init) ?? 10
    }

    /// What one side received and what went wrong on it.
    final class Tally: Sendable {
        let received = NIOLockedValueBox<[Int]>([])
        let failures = NIOLockedValueBox<[String]>([])
    }

    @Test("two peers that dial each other at once and send and request at once lose, duplicate and reorder nothing")
    func simultaneousDial() async throws {
        var thrown: [String] = []
        var tieBreaks = 0
        for round in 0..<Self.rounds {
            let (failures, brokeTie) = try await Self.round(round)
            thrown += failures
            if brokeTie { tieBreaks += 1 }
        }
        #expect(thrown.isEmpty, "\(thrown.count) failures: \(thrown.prefix(10))")
        // The rounds did exercise the tie-break (both peers dialled before either handshake completed).
        #expect(tieBreaks > 0, "no round had two connections to break a tie between")
        print("simultaneous dial: \(Self.rounds) rounds, \(tieBreaks) with a tie-break, \(thrown.count) failures")
    }

    /// One pair: returns its failures and whether a tie-break happened.
    static func round(_ round: Int) async throws -> ([String], Bool) {
        let serviceType = randomServiceType()
        let discoveryA = ManualDiscovery(), discoveryB = ManualDiscovery()
        // Each on a one-thread event loop of its own, so that both can be held still while both
        // find each other: both dial before either handshake can complete.
        let groupA = MultiThreadedEventLoopGroup(numberOfThreads: 1), groupB = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // Kept at debug level, and printed for a round that fails.
        let logA = CapturedLog(), logB = CapturedLog()
        var configurationA = manualConfiguration(serviceType: serviceType, name: "a\(round)", discovery: discoveryA)
        configurationA.eventLoopGroup = groupA
        configurationA.logger = logA.logger
        configurationA.logger.logLevel = .debug
        var configurationB = manualConfiguration(serviceType: serviceType, name: "b\(round)", discovery: discoveryB)
        configurationB.eventLoopGroup = groupB
        configurationB.logger = logB.logger
        configurationB.logger.logLevel = .debug
        let a = PeerTransceiver(configuration: configurationA)
        let b = PeerTransceiver(configuration: configurationB)
        return try await withOwnLoops([groupA, groupB], running: [a, b]) {
            let tallyA = Tally(), tallyB = Tally()
            for (transceiver, tally) in [(a, tallyA), (b, tallyB)] {
                transceiver.receive(Numbered.self) { message in tally.received.withLockedValue { $0.append(message.n) } }
                let name = transceiver.configuration.peerName
                transceiver.respond(to: Ask.self) { ask, _ in Answer(n: ask.n, from: name) }
            }
            try await a.start()
            try await b.start()
            try findEachOtherAtOnce((a, discoveryA, groupA), (b, discoveryB, groupB))

            // Each side sends as soon as its waitForPeer returns, while the tie-break may still be
            // under way.
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for (sender, tally) in [(a, tallyA), (b, tallyB)] {
                    tasks.addTask {
                        let peer = try await sender.waitForPeer(timeout: .seconds(20))
                        try await withThrowingTaskGroup(of: Void.self) { work in
                            work.addTask {
                                for n in 0..<messages {
                                    do {
                                        try await sender.send(Numbered(n: n), to: [peer])
                                    } catch {
                                        tally.failures.withLockedValue { $0.append("send \(n) from \(sender.configuration.peerName): \(error)") }
                                    }
                                }
                            }
                            for n in 0..<requests {
                                work.addTask {
                                    do {
                                        let answer = try await sender.request(Ask(n: n), to: peer, expecting: Answer.self, timeout: .seconds(20))
                                        if answer.n != n {
                                            tally.failures.withLockedValue { $0.append("request \(n) was answered with \(answer.n)") }
                                        }
                                    } catch {
                                        tally.failures.withLockedValue { $0.append("request \(n) from \(sender.configuration.peerName): \(error)") }
                                    }
                                }
                            }
                            try await work.waitForAll()
                        }
                    }
                }
                try await tasks.waitForAll()
            }
            // Every message arrives once, in order, on whichever connection survived.
            for (receiver, tally) in [(b, tallyA), (a, tallyB)] {
                _ = receiver
                try await within(20, "every message to arrive") {
                    while tally.received.withLockedValue({ $0.count }) < messages { try await Task.sleep(for: .milliseconds(10)) }
                }
            }
            // A little longer: a duplicate would arrive late.
            try await Task.sleep(for: .milliseconds(50))
            var failures = tallyA.failures.withLockedValue { $0 } + tallyB.failures.withLockedValue { $0 }
            for (name, tally) in [("b→a", tallyA), ("a→b", tallyB)] {
                let received = tally.received.withLockedValue { $0 }
                if received != Array(0..<messages) {
                    failures.append("round \(round) \(name): \(received.count) messages, first out of place at \(zip(received, 0...).first { $0 != $1 }.map { "\($0.1)" } ?? "the end")")
                }
            }
            let tieBreaks = (a.session?.manager.tieBreakCount() ?? 0) + (b.session?.manager.tieBreakCount() ?? 0)
            if !failures.isEmpty {
                print("round \(round) failed; a's log:\n" + logA.messages().joined(separator: "\n") + "\nb's log:\n" + logB.messages().joined(separator: "\n"))
            }
            return (failures, tieBreaks > 0)
        }
    }
}
