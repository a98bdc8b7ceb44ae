/// Strings from bytes that must be valid UTF-8.
enum UTF8Text {
    /// The string the bytes spell, or nil when they are not valid UTF-8.
    ///
    /// ASCII, by far the common case for keys and wire types, takes a specialised path;
    /// `String(validating:as:)` is only called for other text because it is not specialised for
    /// the caller and instantiates generic metadata on every call.
    static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        if unsafe isASCII(bytes) { return unsafe String(decoding: bytes, as: UTF8.self) }
        return unsafe String(validating: bytes, as: UTF8.self)
    }

    /// The same for an array of bytes.
    static func string(_ bytes: [UInt8]) -> String? {
        unsafe bytes.withUnsafeBytes { unsafe string($0) }
    }

    /// The string of bytes the caller has found to be ASCII (every byte below 0x80).
    ///
    /// ASCII is valid UTF-8, so nothing can fail; `String(decoding:as:)` would replace an invalid
    /// sequence rather than trap, should a caller be wrong.
    static func string(ascii bytes: UnsafeRawBufferPointer) -> String {
        unsafe assert(isASCII(bytes), "UTF8Text.string(ascii:) was given bytes that are not ASCII")
        return unsafe String(decoding: bytes, as: UTF8.self)
    }

    /// Whether every byte is below 0x80, looking at eight bytes per step.
    ///
    /// The loop ORs the words together without an early exit, so the compiler can vectorise it;
    /// a byte-at-a-time loop that stops at the first high byte cannot be.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var index = 0
        var word: UInt64 = 0
        // `index` never passes `count`, so the wrapping arithmetic cannot wrap; it spares the
        // overflow checks that would keep the loop from being vectorised.
        while index &+ 8 <= count {
            unsafe word |= base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index &+= 8
        }
        var tail: UInt8 = 0
        while index < count {
            unsafe tail |= base.load(fromByteOffset: index, as: UInt8.self)
            index &+= 1
        }
        return word & 0x8080_8080_8080_8080 == 0 && tail < 0x80
    }
}
