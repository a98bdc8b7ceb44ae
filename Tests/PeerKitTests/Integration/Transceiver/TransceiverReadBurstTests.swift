import NIOCore
import Testing
@testable import PeerKit

/// Many frames in one read reach the layers above together (one hand-off per read, not per
/// message): they must still be handled in the wire's order, with the protocol's own frames among
/// them in their places, and a session must acknowledge every one.
@Suite("Frames that arrive in one read")
struct TransceiverReadBurstTests {
    @Test("a session's resume, resend and 500 messages written at once: the messages are handled in order, and the session acknowledges all 500")
    func burstInOneWrite() async throws {
        let serviceType = randomServiceType()
        let transceiver = PeerTransceiver(configuration: rawPeerConfiguration(serviceType: serviceType, name: "burst"))
        let inbox = Inbox<Note>()
        transceiver.receive(Note.self) { note in inbox.put(note) }
        try await transceiver.start()
        defer { transceiver.stop() }
        let raw = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        defer { raw.close() }
        try await raw.sayHello(serviceType: serviceType, features: ["resume"], session: "burst-\(UInt64.random(in: 0 ... .max))")
        let hello = try #require(await raw.nextFrame())
        #expect(hello.hasPrefix(#"{"type":"peerkit.hello""#))

        // The session's control frames first (they end the run of messages before them, of
        // which there is none), then the messages, all in one write.
        var burst = ByteBuffer.frame(#"{"type":"peerkit.resume","payload":{"received":0}}"#)
        burst.writeImmutableBuffer(.frame(#"{"type":"peerkit.resend","payload":{"from":1}}"#))
        for index in 0..<500 {
            burst.writeImmutableBuffer(.frame(#"{"type":"Note","payload":{"text":"\#(index)"}}"#))
        }
        try await raw.write(burst)
        #expect(try await inbox.take(500, within: 60).map(\.text) == (0..<500).map(String.init))

        // Each acknowledgement counts every frame before it: the last one says 500. Pings come
        // every 10 s; three of them without it mean it is not coming.
        var acknowledged: [String] = []
        var pings = 0
        while pings < 3, let frame = await raw.nextFrame(skipping: []) {
            if frame.hasPrefix(#"{"type":"peerkit.ping""#) { pings += 1 }
            if frame.hasPrefix(#"{"type":"peerkit.ack""#) { acknowledged.append(frame) }
            if acknowledged.last == #"{"type":"peerkit.ack","payload":{"received":500}}"# { break }
        }
        #expect(acknowledged.last == #"{"type":"peerkit.ack","payload":{"received":500}}"#, "acknowledgements: \(acknowledged)")
        #expect(transceiver.connectedPeers.count == 1)
    }
}
