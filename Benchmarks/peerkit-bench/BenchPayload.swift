import PeerKit

/// The message every PeerKit measurement sends: a `String` and an `Int`, as in issue 6.
///
/// Its JSON, `{"text":"…","seq":1234567}`, is `size` bytes for a seven-digit `seq`: the text fills
/// what the 25 bytes of keys and punctuation leave. The pyzmq baseline builds the same object.
struct BenchPayload: BenchMessage {
    /// The bytes of JSON around the text for a seven-digit `seq`.
    static let jsonOverhead = 25

    /// The `seq` of the message that ends a one-way run.
    static let endOfRun = -1

    /// Filler that makes the payload `size` bytes long.
    var text: String
    /// The message's position in the run; `endOfRun` marks the last message of a run.
    var seq: Int

    init(text: String, seq: Int) {
        self.text = text
        self.seq = seq
    }
}

/// ``BenchPayload`` with its own payload coding (`PeerPayloadCodable`) instead of `Codable`'s:
/// the same JSON under the same wire key, so that `--own-coding` measures what the protocol saves
/// and nothing else.
struct OwnCodedBenchPayload: BenchMessage, PeerPayloadCodable, PeerMessage {
    static var messageType: String { "BenchPayload" }

    var text: String
    var seq: Int

    init(text: String, seq: Int) {
        self.text = text
        self.seq = seq
    }

    func encode(to payload: inout PayloadWriter) throws {
        payload.write(text, forKey: "text")
        payload.write(seq, forKey: "seq")
    }

    init(from payload: PayloadReader) throws {
        text = try payload.read(String.self, forKey: "text")
        seq = try payload.read(Int.self, forKey: "seq")
    }
}

/// What the one-way and request/reply measurements send: ``BenchPayload``, or
/// ``OwnCodedBenchPayload`` with `--own-coding`.
protocol BenchMessage: Codable, Sendable, SendableMetatype {
    var text: String { get set }
    var seq: Int { get set }
    init(text: String, seq: Int)
}

extension BenchMessage {
    /// A payload whose JSON is about `size` bytes.
    init(size: Int, seq: Int) {
        self.init(text: String(repeating: "x", count: max(size - BenchPayload.jsonOverhead, 0)), seq: seq)
    }

    /// The same text with another sequence number (the text's storage is shared).
    func with(seq: Int) -> Self {
        var copy = self
        copy.seq = seq
        return copy
    }

    /// The payload's size as counted for MB/s: the JSON bytes it stands for.
    var nominalSize: Int { text.utf8.count + BenchPayload.jsonOverhead }
}
