import Crypto

/// The SHA-256 digest of a resource as the protocol writes it: 64 lowercase hex digits.
enum ResourceDigest {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `digest` in lowercase hex.
    static func hex(_ digest: SHA256.Digest) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(SHA256.Digest.byteCount * 2)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
