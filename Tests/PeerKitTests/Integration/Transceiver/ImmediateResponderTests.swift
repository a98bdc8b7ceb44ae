import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing
@testable import PeerKit

/// `respondImmediately(to:using:)` between real transceivers: answered on the connection's event
/// loop, with the replies, errors and order of `respond(to:using:)`.
@Suite("Immediate responders over loopback TCP")
struct ImmediateResponderTests {
    @Test("a request is answered on the connection's event loop; many at once are each matched to their reply")
    func answeredOnTheLoop() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 2)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let onLoop = NIOLockedValueBox<[Bool]>([])
        hub.respondImmediately(to: Question.self) { question, sender in
            onLoop.withLockedValue { $0.append(MultiThreadedEventLoopGroup.currentEventLoop != nil) }
            return Answer(text: question.text.uppercased(), from: sender.name)
        }
        let hubPeer = try #require(spokes[0].connectedPeers.first)
        let answer = try await spokes[0].request(Question(text: "ping"), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout)
        #expect(answer == Answer(text: "PING", from: "spoke0"))
        let answers = try await askAtOnce(spokes[0], hubPeer)
        #expect(answers.count == 50)
        #expect(answers.allSatisfy { $0.value.text == "Q\($0.key)" && $0.value.from == "spoke0" })
        // The first request found nothing ahead of it: it ran on an event loop, not in a task.
        #expect(onLoop.withLockedValue { $0.first } == true)
    }

    @Test("an immediate responder's error, and a request it cannot decode, reach the requester as the peer's sentence")
    func errors() async throws {
        struct Refusal: Error, CustomStringConvertible { var description: String { "The price list is being replaced; ask again in a second." } }
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        hub.respondImmediately(to: Question.self) { _, _ -> Answer in throw Refusal() }
        hub.respondImmediately(to: Numbered.self) { numbered, _ in Numbered(n: numbered.n + 1) }
        let hubPeer = try #require(spokes[0].connectedPeers.first)
        await #expect(throws: PeerKitError.remoteError(reason: "The price list is being replaced; ask again in a second.", peer: "hub")) {
            _ = try await spokes[0].request(Question(text: "?"), to: hubPeer, expecting: Answer.self, timeout: generousRequestTimeout)
        }
        // A Numbered whose member is a string: the responder's side names the field.
        let wrong = RawPeerMessage(type: "Numbered", json: #"{"n":"seven"}"#)
        let error = await #expect(throws: PeerKitError.self) {
            _ = try await spokes[0].request(wrong, to: hubPeer, timeout: generousRequestTimeout)
        }
        #expect(error?.code == .remoteError)
        #expect(error?.reason?.contains("\"n\" is not of type Int") == true)
        // The connection stays up and the next request is answered.
        #expect(try await spokes[0].request(Numbered(n: 41), to: hubPeer, expecting: Numbered.self, timeout: generousRequestTimeout).n == 42)
    }

    @Test("requests answered immediately keep their order with a peer's other messages, and handlers still run one at a time")
    func orderWithOtherHandlers() async throws {
        let (hub, spokes) = try await connectedStar(spokes: 1)
        defer { hub.stop(); spokes.forEach { $0.stop() } }
        let log = NIOLockedValueBox<[String]>([])
        let running = NIOLockedValueBox(0)
        let overlapped = NIOLockedValueBox(false)
        @Sendable func enter(_ entry: String) {
            log.withLockedValue { $0.append(entry) }
            running.withLockedValue { count in
                count += 1
                if count > 1 { overlapped.withLockedValue { $0 = true } }
            }
        }
        @Sendable func leave() { running.withLockedValue { $0 -= 1 } }
        hub.receive(Note.self) { note, _ in
            enter(note.text)
            // Long enough for the requests behind it to arrive while it runs.
            try? await Task.sleep(for: .milliseconds(20))
            leave()
        }
        hub.respondImmediately(to: Numbered.self) { numbered, _ in
            enter("n\(numbered.n)")
            leave()
            return numbered
        }
        let hubPeer = try #require(spokes[0].connectedPeers.first)
        for round in 0..<20 {
            try await spokes[0].send(Note(text: "note\(round)"), to: [hubPeer])
            #expect(try await spokes[0].request(Numbered(n: round), to: hubPeer, expecting: Numbered.self, timeout: generousRequestTimeout).n == round)
        }
        let expected = (0..<20).flatMap { ["note\($0)", "n\($0)"] }
        #expect(log.withLockedValue { $0 } == expected)
        #expect(overlapped.withLockedValue { $0 } == false)
    }
}
