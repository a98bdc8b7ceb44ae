/// Where long strings end in one JSON text, found by one scan and handed to the next.
///
/// ``EnvelopeParser`` checks a whole frame, the payload's strings included; ``PayloadDecoder``
/// then needs to know where the same strings end. For a long string (Base64 data, a document)
/// finding the closing quote is most of the work of decoding it, so the envelope scan records the
/// ends of strings of at least ``minimumLength`` bytes and the payload's ``JSONDocument`` starts
/// with them. Short strings are not recorded: scanning them again is cheaper than the lookup.
package final class LongStringEnds {
    /// Strings at least this long (quotes included) are recorded.
    package static let minimumLength = 256

    /// The offset just past each long string's closing quote, by the offset of its opening quote.
    private(set) var ends: [Int: Int] = [:]

    package init() {}

    /// Records the string from `start` (its opening quote) to `end` (just past its closing quote),
    /// if it is long.
    @inline(__always)
    func record(start: Int, end: Int) {
        if end - start >= Self.minimumLength { ends[start] = end }
    }

    /// The ends of the strings inside `range`, as offsets from `range.lowerBound`.
    package func ends(in range: Range<Int>) -> [Int: Int] {
        guard !ends.isEmpty else { return [:] }
        var rebased: [Int: Int] = [:]
        for (start, end) in ends where range.contains(start) && end <= range.upperBound {
            rebased[start - range.lowerBound] = end - range.lowerBound
        }
        return rebased
    }
}
