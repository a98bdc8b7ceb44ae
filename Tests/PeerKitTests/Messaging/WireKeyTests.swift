import NIOCore
import Testing
@testable import PeerKit

/// What PeerKit remembers of each message type it sends: its wire key, and the size of its last
/// frame, which the next frame's buffer starts at.
@Suite("Wire keys")
struct WireKeyTests {
    struct Sized: Codable {
        var text: String
    }

    struct Named: Codable, PeerMessage {
        static var messageType: String { "com.example.Named" }
    }

    @Test("a type's next frame starts with room for its last one and an eighth more, and is the same frame a buffer grown from nothing makes")
    func frameCapacityFollowsTheLastFrame() throws {
        struct Fresh: Codable { var text: String }
        let key = wireKey(of: Fresh.self)
        #expect(key.frameCapacity == WireKey.minimumFrameCapacity, "nothing sent yet")

        let long = Fresh(text: String(repeating: "x", count: 400))
        let first = try MessageCodec.encode(long)
        let bytes = try #require(first.encodedFrameBytes)
        #expect(bytes > 400)
        #expect(key.frameCapacity == bytes + bytes / 8)

        // Started at the hint or grown from the smallest buffer: the same bytes.
        let hinted = try MessageCodec.encode(long).frame()
        let grown = try EncodedMessage(type: key.name, encoding: long).frame()
        #expect(hinted == grown)

        // A shorter message brings the hint down; never below the smallest buffer.
        _ = try MessageCodec.encode(Fresh(text: "hi"))
        #expect(key.frameCapacity == WireKey.minimumFrameCapacity)
    }

    @Test("a frame much smaller than the last of its type is not left in the buffer made for that one, and a huge frame does not make the next one start huge")
    func smallAfterLarge() throws {
        struct Varied: Codable { var text: String }
        let key = wireKey(of: Varied.self)
        _ = try MessageCodec.encode(Varied(text: String(repeating: "x", count: 20_000)))
        #expect(key.frameCapacity > 20_000)

        let small = try MessageCodec.encode(Varied(text: "hi"))
        let frame = small.frame()
        // An outbox counts the frame's bytes: the buffer holds at most twice them, as a buffer
        // grown from the smallest one would.
        #expect(frame.capacity <= max(WireKey.minimumFrameCapacity, 2 * frame.readableBytes))
        #expect(String(buffer: small.payload) == #"{"text":"hi"}"#)
        #expect(frame == (try EncodedMessage(type: key.name, encoding: Varied(text: "hi"))).frame())

        _ = try MessageCodec.encode(Varied(text: String(repeating: "y", count: 200_000)))
        #expect(key.frameCapacity == WireKey.maximumFrameCapacity)
    }

    @Test("every caller gets the same key for a type, however many ask at once, and a PeerMessage names its own")
    func oneKeyPerType() async {
        struct Raced: Codable {}
        let keys = await withTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<16 { group.addTask { ObjectIdentifier(wireKey(of: Raced.self)) } }
            return await group.reduce(into: Set<ObjectIdentifier>()) { $0.insert($1) }
        }
        #expect(keys.count == 1)
        #expect(peerMessageType(of: Named.self) == "com.example.Named")
        #expect(peerMessageType(of: Sized.self) == "Sized")
    }
}
