/// One payload being decoded: the reader over its bytes, and what the decoders share to keep
/// decoding linear in the size of the payload.
///
/// A keyed or unkeyed container finds its members by skipping over each value. Skipping a nested
/// container walks all of it, so without help a value nested `d` levels deep would be walked once
/// by each of its `d` enclosing containers: decoding a deep document would cost its size times its
/// depth. The document counts the bytes walked that way; once they exceed ``walkBudget(for:)``
/// (a few times the payload's size, which ordinary payloads never reach), it indexes where every
/// container ends in one more pass, and from then on a nested container is skipped in one lookup.
/// So decoding walks each byte a bounded number of times whatever the shape of the payload.
///
/// The index holds one entry per container, at most one per two bytes of payload (`[]`), so its
/// memory is bounded by the frame limit like the payload's own; Foundation's JSONDecoder keeps a
/// larger entry for every value.
final class JSONDocument {
    let reader: JSONReader
    /// Where each container ends (just past its closing bracket), by where it starts; built on demand.
    private var containerEnds: [Int: Int]?
    /// Bytes walked while skipping nested containers before the index exists.
    private var walkedBytes = 0
    /// A count of the elementary steps taken (bytes walked, keys compared or hashed), for tests
    /// that assert decoding is linear in the payload's size without measuring time.
    private(set) var work = 0
    /// Where each long string ends (just past its closing quote), by where it starts: handed over
    /// by the envelope scan, or found when a container skips over it, so decoding it later does
    /// not scan it again.
    private var longStringEnds: [Int: Int]

    /// - Parameter longStringEnds: where long strings of these bytes end, as recorded by a
    ///   ``LongStringEnds`` of an earlier scan, with offsets into `reader`'s bytes.
    init(reader: JSONReader, longStringEnds: [Int: Int] = [:]) {
        self.reader = reader
        self.longStringEnds = longStringEnds
    }

    /// Nested walking allowed before the container index is built, for a payload of `size` bytes.
    static func walkBudget(for size: Int) -> Int { 4 * size + 65_536 }

    /// Records `steps` elementary steps of decoding work.
    func count(_ steps: Int) { work &+= steps }

    /// The offset just past the value starting at `start`, whose syntax was checked before decoding.
    func valueEnd(at start: Int) throws(JSONSyntaxError) -> Int {
        switch reader.byte(at: start) {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            if let containerEnds {
                work &+= 1
                guard let end = containerEnds[start] else {
                    throw JSONSyntaxError(reason: "no container starts at offset \(start)")
                }
                return end
            }
            let end = try reader.skipValue(at: start)
            walkedBytes += end - start
            work &+= end - start
            if unsafe walkedBytes > Self.walkBudget(for: reader.bytes.count) {
                try indexContainers()
            }
            return end
        case UInt8(ascii: "\""):
            let end = try stringEnd(at: start)
            work &+= end - start
            return end
        default:
            let end = try reader.skipValue(at: start)
            work &+= end - start
            return end
        }
    }

    /// The offset just past the string whose opening quote is at `start` (see
    /// ``JSONReader/stringEnd(at:)``), remembered for long strings.
    func stringEnd(at start: Int) throws(JSONSyntaxError) -> Int {
        if !longStringEnds.isEmpty, let end = longStringEnds[start] { return end }
        let end = try reader.stringEnd(at: start)
        if end - start >= LongStringEnds.minimumLength { longStringEnds[start] = end }
        return end
    }

    /// Decodes the string whose opening quote is at `start`; a long string skipped before is
    /// not scanned again (see ``JSONReader/string(at:end:)``).
    func string(at start: Int) throws(JSONSyntaxError) -> String {
        if !longStringEnds.isEmpty, let end = longStringEnds[start] {
            return try reader.string(at: start, end: end)
        }
        return try reader.string(at: start)
    }

    /// One more pass over the payload, with the walk that checked its syntax, recording where each
    /// container ends.
    private func indexContainers() throws(JSONSyntaxError) {
        let ends = JSONContainerEnds()
        var recorder = reader
        recorder.containerEnds = ends
        _ = try recorder.skipValue(at: recorder.skipWhitespace(from: 0))
        unsafe work &+= reader.bytes.count
        containerEnds = ends.ends
    }
}
