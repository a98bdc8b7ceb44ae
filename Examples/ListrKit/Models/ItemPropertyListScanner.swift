import Foundation

/// A fast reader of the property lists Listr writes, for ``ItemPropertyList/decode(_:checkingRules:)``.
///
/// Foundation's `PropertyListDecoder` takes about 0.8 s for a dump of 200,000 items; this reads
/// the same in about a tenth of that, because it only knows one shape: an XML property list whose
/// root is an array of dicts with exactly the keys `id`, `title` (strings) and `done` (`<true/>` or
/// `<false/>`), as `PropertyListEncoder` writes it. Anything else, however valid (a binary
/// property list, a comment, CDATA, a carriage return, an entity other than the five predefined
/// ones and character references, another key, a missing or repeated key, `<string/>`), makes it
/// return nil, and the caller falls back to Foundation, which reads everything and names the
/// problems. So it never reads a list differently from Foundation: it reads fewer lists.
struct ItemPropertyListScanner {
    /// One dict of the root array, as read.
    struct Entry: Equatable {
        var id: String
        var title: String
        var done: Bool
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var offset = 0

    /// The entries of `data`, or nil when it is not in the one shape this reads.
    static func entries(in data: Data) -> [Entry]? {
        data.withUnsafeBytes { raw in
            var scanner = ItemPropertyListScanner(bytes: raw.bindMemory(to: UInt8.self))
            return scanner.document()
        }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    private mutating func document() -> [Entry]? {
        skipSpace()
        if starts(with: "<?xml") { guard skip(past: "?>") else { return nil } }
        skipSpace()
        if starts(with: "<!DOCTYPE") { guard skip(past: ">") else { return nil } }
        skipSpace()
        guard starts(with: "<plist"), skip(past: ">") else { return nil }
        skipSpace()
        var entries: [Entry] = []
        if take("<array/>") {
            // an empty list
        } else {
            guard take("<array>") else { return nil }
            while true {
                skipSpace()
                if take("</array>") { break }
                guard let entry = dict() else { return nil }
                entries.append(entry)
            }
        }
        skipSpace()
        guard take("</plist>") else { return nil }
        skipSpace()
        return offset == bytes.count ? entries : nil
    }

    private mutating func dict() -> Entry? {
        guard take("<dict>") else { return nil }
        var id: String?
        var title: String?
        var done: Bool?
        for _ in 0..<3 {
            skipSpace()
            guard take("<key>"), let key = text(until: "</key>") else { return nil }
            skipSpace()
            switch key {
            case "id" where id == nil:
                guard take("<string>"), let value = text(until: "</string>") else { return nil }
                id = value
            case "title" where title == nil:
                guard take("<string>"), let value = text(until: "</string>") else { return nil }
                title = value
            case "done" where done == nil:
                if take("<true/>") {
                    done = true
                } else if take("<false/>") {
                    done = false
                } else {
                    return nil
                }
            default:
                return nil
            }
        }
        skipSpace()
        guard take("</dict>"), let id, let title, let done else { return nil }
        return Entry(id: id, title: title, done: done)
    }

    /// The text up to `end` (which is consumed), with entities replaced; nil for anything this
    /// does not read (markup, a carriage return, an unknown entity, bytes that are not UTF-8).
    private mutating func text(until end: StaticString) -> String? {
        let start = offset
        var plain = true
        while offset < bytes.count, bytes[offset] != UInt8(ascii: "<") {
            switch bytes[offset] {
            case UInt8(ascii: "&"): plain = false
            case UInt8(ascii: "\r"), UInt8(ascii: ">"): return nil
            default: break
            }
            offset += 1
        }
        let raw = UnsafeBufferPointer(rebasing: bytes[start..<offset])
        guard take(end) else { return nil }
        guard let text = String(validating: raw, as: UTF8.self) else { return nil }
        return plain ? text : Self.replacingEntities(in: text)
    }

    private static func replacingEntities(in text: String) -> String? {
        var result = ""
        var rest = Substring(text)
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            guard let semicolon = rest[ampersand...].firstIndex(of: ";") else { return nil }
            let name = rest[rest.index(after: ampersand)..<semicolon]
            switch name {
            case "amp": result += "&"
            case "lt": result += "<"
            case "gt": result += ">"
            case "quot": result += "\""
            case "apos": result += "'"
            default:
                guard name.hasPrefix("#") else { return nil }
                let number = name.dropFirst()
                let value = number.hasPrefix("x") ? UInt32(number.dropFirst(), radix: 16) : UInt32(number, radix: 10)
                guard let value, value != 0, value != 0x0D, let scalar = Unicode.Scalar(value) else { return nil }
                result.unicodeScalars.append(scalar)
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return result + rest
    }

    private mutating func skipSpace() {
        while offset < bytes.count, [0x20, 0x09, 0x0A].contains(bytes[offset]) { offset += 1 }
    }

    private func starts(with literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - offset >= count else { return false }
        let pattern = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for index in 0..<count where bytes[offset + index] != pattern[index] { return false }
        return true
    }

    private mutating func take(_ literal: StaticString) -> Bool {
        guard starts(with: literal) else { return false }
        offset += literal.utf8CodeUnitCount
        return true
    }

    /// Moves past the next `literal`; false when there is none.
    private mutating func skip(past literal: StaticString) -> Bool {
        while offset < bytes.count {
            if take(literal) { return true }
            offset += 1
        }
        return false
    }
}
