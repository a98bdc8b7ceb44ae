import CAvahi

/// DNS-SD TXT records (RFC 6763 §6) as unordered key/value pairs, and their Avahi string lists.
///
/// Avahi prepends to its string lists and the daemon may reorder them, so a TXT record is a
/// dictionary here, never a sequence.
enum TXTRecord {
    /// The pairs of a TXT record given as its raw strings.
    ///
    /// `key=value` gives `key: value`; a string without `=` is a boolean attribute and gives
    /// `key: ""`. Empty strings and strings that start with `=` have no key and are ignored, as
    /// RFC 6763 §6.4 asks; so are keys that are not UTF-8. When a key occurs more than once, the
    /// first occurrence wins.
    static func pairs<Entries: Sequence>(fromEntries entries: Entries) -> [String: String]
    where Entries.Element: Collection<UInt8> {
        var pairs: [String: String] = [:]
        for entry in entries {
            let separator = entry.firstIndex(of: UInt8(ascii: "="))
            let keyBytes = entry[..<(separator ?? entry.endIndex)]
            guard !keyBytes.isEmpty, let key = String(validating: keyBytes, as: UTF8.self) else { continue }
            guard pairs[key] == nil else { continue }
            if let separator {
                pairs[key] = String(decoding: entry[entry.index(after: separator)...], as: UTF8.self)
            } else {
                pairs[key] = ""
            }
        }
        return pairs
    }

    /// Checks that every pair fits a TXT string; throws the first problem, by key order.
    static func validate(_ pairs: [String: String]) throws(PeerKitError) {
        for (key, value) in pairs.sorted(by: { $0.key < $1.key }) {
            try ServiceType.validateTXTPair(key: key, value: value)
        }
    }

    /// A new Avahi string list holding `pairs`; the caller frees it with `avahi_string_list_free`.
    static func makeStringList(_ pairs: [String: String]) -> UnsafeMutablePointer<AvahiStringList>? {
        var list: UnsafeMutablePointer<AvahiStringList>?
        for (key, value) in pairs.sorted(by: { $0.key < $1.key }) {
            list = avahi_string_list_add_pair(list, key, value)
        }
        return list
    }

    /// The pairs of an Avahi string list, which Avahi owns and may free after the call.
    static func pairs(from list: UnsafeMutablePointer<AvahiStringList>?) -> [String: String] {
        var entries: [[UInt8]] = []
        var node = list
        while let current = node {
            if let text = avahi_string_list_get_text(current) {
                entries.append(Array(UnsafeBufferPointer(start: text, count: avahi_string_list_get_size(current))))
            }
            node = avahi_string_list_get_next(current)
        }
        return pairs(fromEntries: entries)
    }
}
