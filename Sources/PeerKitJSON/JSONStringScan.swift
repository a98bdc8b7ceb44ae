/// Finds where plain JSON string text ends, eight bytes at a time (thirty-two per branch).
///
/// Inside a JSON string only three kinds of byte need attention: `"` (the end), `\` (an escape)
/// and bytes below 0x20 (not allowed raw). Long strings (Base64 data, documents) are mostly
/// none of these, so this checks a 64-bit word per step (SWAR) and only looks at single bytes
/// near a hit. The word tests can report a hit that is not there (a borrow from a lower byte),
/// never miss one, so every hit is confirmed byte by byte. The loops step with wrapping
/// arithmetic (`&+`): an index never passes `end`, so it cannot wrap, and the hot loops carry no
/// overflow checks.
enum JSONStringScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The index of the first `"`, `\` or byte below 0x20 in `bytes[start..<end]`, or `end`.
    static func firstSpecialByte(in bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
        var index = start
        // Four words per step, one branch for all of them; the word loop then finds the word.
        while index &+ 32 <= end {
            let found = unsafe specialBits(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                | specialBits(bytes.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self))
                | specialBits(bytes.loadUnaligned(fromByteOffset: index + 16, as: UInt64.self))
                | specialBits(bytes.loadUnaligned(fromByteOffset: index + 24, as: UInt64.self))
            if found != 0 { break }
            index &+= 32
        }
        while index &+ 8 <= end {
            let word = unsafe bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            if mayContainSpecialByte(word) { break }
            index &+= 8
        }
        while index < end {
            let byte = unsafe bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return index }
            index += 1
        }
        return end
    }

    /// The index of the first `"`, `\`, byte below 0x20 or byte above 0x7F (the start of a
    /// multi-byte UTF-8 sequence, which the reader validates) in `bytes[start..<end]`, or `end`.
    static func firstSpecialOrNonASCIIByte(in bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
        var index = start
        while index &+ 32 <= end {
            let words = unsafe (
                bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self),
                bytes.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self),
                bytes.loadUnaligned(fromByteOffset: index + 16, as: UInt64.self),
                bytes.loadUnaligned(fromByteOffset: index + 24, as: UInt64.self)
            )
            let high = (words.0 | words.1 | words.2 | words.3) & highBits
            let found = specialBits(words.0) | specialBits(words.1) | specialBits(words.2) | specialBits(words.3)
            if high | found != 0 { break }
            index &+= 32
        }
        while index &+ 8 <= end {
            let word = unsafe bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            if word & highBits != 0 || mayContainSpecialByte(word) { break }
            index &+= 8
        }
        while index < end {
            let byte = unsafe bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { return index }
            index += 1
        }
        return end
    }

    /// Whether some byte of `word` may be `"`, `\` or below 0x20.
    @inline(__always)
    private static func mayContainSpecialByte(_ word: UInt64) -> Bool {
        specialBits(word) != 0
    }

    /// Non-zero when some byte of `word` may be `"`, `\` or below 0x20: the high bit of each such
    /// byte is set, and perhaps of bytes above one (a borrow), never of a word without one.
    @inline(__always)
    private static func specialBits(_ word: UInt64) -> UInt64 {
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        // A byte is zero where `x - 1` borrows into its high bit while `x` had none.
        let zeroInQuote = (quote &- ones) & ~quote
        let zeroInBackslash = (backslash &- ones) & ~backslash
        // A byte is below 0x20 where `word - 0x20` borrows into its high bit while it had none.
        let control = (word &- ones &* 0x20) & ~word
        return (zeroInQuote | zeroInBackslash | control) & highBits
    }
}
