/// Strings from bytes that must be valid UTF-8.
enum UTF8Text {
    /// The string the bytes spell, or nil when they are not valid UTF-8.
    ///
    /// ASCII, by far the common case for keys and wire types, takes a specialised path;
    /// `String(validating:as:)` is only called for other text because it is not specialised for
    /// the caller and instantiates generic metadata on every call.
    static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        var isASCII = true
        for byte in bytes where byte >= 0x80 {
            isASCII = false
            break
        }
        if isASCII { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The same for an array of bytes.
    static func string(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { string($0) }
    }
}
