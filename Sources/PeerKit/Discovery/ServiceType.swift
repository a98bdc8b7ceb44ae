/// The rules for DNS-SD service types (RFC 6335 §5.1) and TXT pairs (RFC 6763 §6).
public enum ServiceType {
    /// Throws ``PeerKitError/invalidServiceType(_:reason:)`` unless `name` is 1–15 characters of
    /// lowercase ASCII letters, digits and '-', with at least one letter and no leading,
    /// trailing or doubled '-'.
    public static func validate(_ name: String) throws(PeerKitError) {
        func fail(_ reason: String) -> PeerKitError { .invalidServiceType(name, reason: reason) }
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty else { throw fail("it is empty") }
        guard bytes.count <= 15 else { throw fail("it is \(bytes.count) characters long, and the limit is 15") }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                continue
            default:
                throw fail("it contains \"\(String(decoding: [byte], as: UTF8.self))\", and only lowercase letters, digits and '-' are allowed")
            }
        }
        guard bytes.contains(where: { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }) else {
            throw fail("it has no letter")
        }
        guard bytes.first != UInt8(ascii: "-"), bytes.last != UInt8(ascii: "-") else {
            throw fail("it starts or ends with '-'")
        }
        guard !name.contains("--") else { throw fail("it contains \"--\"") }
    }

    /// Throws ``PeerKitError/invalidDiscoveryInfo(key:reason:)`` unless `key=value` fits a TXT
    /// string: a non-empty printable-ASCII key without '=', and at most 255 bytes in all.
    public static func validateTXTPair(key: String, value: String) throws(PeerKitError) {
        guard !key.isEmpty else { throw .invalidDiscoveryInfo(key: key, reason: "the key is empty") }
        guard key.utf8.allSatisfy({ (0x20...0x7E).contains($0) && $0 != UInt8(ascii: "=") }) else {
            throw .invalidDiscoveryInfo(key: key, reason: "a key must be printable ASCII without '='")
        }
        let length = key.utf8.count + 1 + value.utf8.count
        guard length <= 255 else {
            throw .invalidDiscoveryInfo(key: key, reason: "\"key=value\" is \(length) bytes long, and a TXT string holds at most 255")
        }
    }
}
