/// The message every PeerKit measurement sends: a `String` and an `Int`, as in issue 6.
///
/// Its JSON, `{"text":"…","seq":1234567}`, is `size` bytes for a seven-digit `seq`: the text fills
/// what the 25 bytes of keys and punctuation leave. The pyzmq baseline builds the same object.
struct BenchPayload: Codable, Sendable {
    /// The bytes of JSON around the text for a seven-digit `seq`.
    static let jsonOverhead = 25

    /// Filler that makes the payload `size` bytes long.
    var text: String
    /// The message's position in the run; `endOfRun` marks the last message of a run.
    var seq: Int

    /// The `seq` of the message that ends a one-way run.
    static let endOfRun = -1

    /// A payload whose JSON is about `size` bytes.
    init(size: Int, seq: Int) {
        self.text = String(repeating: "x", count: max(size - Self.jsonOverhead, 0))
        self.seq = seq
    }

    /// The same text with another sequence number (the text's storage is shared).
    func with(seq: Int) -> BenchPayload {
        var copy = self
        copy.seq = seq
        return copy
    }

    /// The payload's size as counted for MB/s: the JSON bytes it stands for.
    var nominalSize: Int { text.utf8.count + Self.jsonOverhead }
}
