import Foundation

/// A fast writer of Listr's dump format, for ``ItemPropertyList/encode(_:)``.
///
/// Foundation's `PropertyListEncoder` builds a tree of boxed values and then walks it; for a
/// 64 MiB store that was a third of what `listrd` spent on a `store dump`. This writes the same
/// bytes: the XML property list `PropertyListEncoder` writes for an array of dicts with the keys
/// `done`, `id` and `title`, byte for byte (the tests compare the two). It measures the output
/// first, then writes it through a pointer into one buffer of exactly that size, copying each
/// title's runs without `&`, `<` and `>` whole (found sixteen bytes at a time).
///
/// A title with a character this writer does not know how Foundation writes (a control character
/// other than tab and line feed) makes it return nil, and the caller falls back to Foundation. So
/// it never writes a list differently from Foundation.
enum ItemPropertyListWriter {
    /// The property list of `items`, or nil when one of them needs Foundation.
    static func data(for items: [Item]) -> Data? {
        guard let itemsLength = itemsLength(items) else { return nil }
        let size = headLength(empty: items.isEmpty) + itemsLength + tailLength(empty: items.isEmpty)
        var data = Data(count: size)
        let written = data.withUnsafeMutableBytes { raw -> Int in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
            var output = Output(next: base)
            output.appendHead(empty: items.isEmpty)
            for item in items { output.append(item) }
            output.appendTail(empty: items.isEmpty)
            return output.next - base
        }
        // The two passes agree by construction (the same scan decides both); should they not, the
        // caller's Foundation path writes the list.
        return written == size ? data : nil
    }

    /// The length of the items' `<dict>`s (the property list without its head and tail), or nil
    /// when one of them needs Foundation.
    static func itemsLength(_ items: [Item]) -> Int? {
        var total = 0
        for item in items {
            guard let length = length(of: item) else { return nil }
            total += length
        }
        return total
    }

    /// The bytes of one item's `<dict>`, or nil when its title needs Foundation.
    static func length(of item: Item) -> Int? {
        var title = item.title
        return title.withUTF8 { length(done: item.done, escapedTitle: escapedCount(of: $0)) }
    }

    /// The bytes of one row's `<dict>`, or nil when its title needs Foundation or is not valid
    /// UTF-8 (a row read from a database file is not checked as a `String` is).
    static func length(of row: ItemRow) -> Int? {
        guard isValidUTF8(row.title) else { return nil }
        return length(done: row.done, escapedTitle: escapedCount(of: row.title))
    }

    /// The most bytes one row's `<dict>` can take, whatever its title holds (each title byte
    /// escaped as `&amp;`): room enough to write it without measuring it first.
    static func maximumLength(of row: ItemRow) -> Int {
        doneFalse.utf8CodeUnitCount + uuidLength + betweenIDAndTitle.utf8CodeUnitCount
            + row.title.count * 5 + afterTitle.utf8CodeUnitCount
    }

    private static func length(done: Bool, escapedTitle: Int?) -> Int? {
        guard let escapedTitle else { return nil }
        return (done ? doneTrue : doneFalse).utf8CodeUnitCount + uuidLength
            + betweenIDAndTitle.utf8CodeUnitCount + escapedTitle + afterTitle.utf8CodeUnitCount
    }

    static func headLength(empty: Bool) -> Int {
        header.utf8CodeUnitCount + (empty ? 0 : array.utf8CodeUnitCount)
    }

    static func tailLength(empty: Bool) -> Int {
        (empty ? emptyArray : end).utf8CodeUnitCount
    }

    /// Writes the property list's beginning (through `<array>`) at `base`; returns its length.
    static func writeHead(empty: Bool, at base: UnsafeMutablePointer<UInt8>) -> Int {
        var output = Output(next: base)
        output.appendHead(empty: empty)
        return output.next - base
    }

    /// Writes one row at `base`, where the caller made room for its ``maximumLength(of:)``;
    /// returns its length. The row's title must have been checked with `length(of:)`.
    static func write(_ row: ItemRow, at base: UnsafeMutablePointer<UInt8>) -> Int {
        var output = Output(next: base)
        output.append(done: row.done, id: row.id, title: row.title)
        return output.next - base
    }

    /// Writes the property list's end at `base`; returns its length.
    static func writeTail(empty: Bool, at base: UnsafeMutablePointer<UInt8>) -> Int {
        var output = Output(next: base)
        output.appendTail(empty: empty)
        return output.next - base
    }

    /// Where the next byte goes, in a buffer measured to fit.
    private struct Output {
        var next: UnsafeMutablePointer<UInt8>

        mutating func append(_ text: StaticString) {
            append(text.utf8Start, count: text.utf8CodeUnitCount)
        }

        mutating func appendHead(empty: Bool) {
            append(header)
            if !empty { append(array) }
        }

        mutating func appendTail(empty: Bool) {
            append(empty ? emptyArray : end)
        }

        mutating func append(_ item: Item) {
            var title = item.title
            title.withUTF8 { append(done: item.done, id: item.id.uuid, title: $0) }
        }

        mutating func append(done: Bool, id: uuid_t, title: UnsafeBufferPointer<UInt8>) {
            append(done ? doneTrue : doneFalse)
            appendUUID(id)
            append(betweenIDAndTitle)
            appendEscaped(title)
            append(afterTitle)
        }

        mutating func append(_ bytes: UnsafePointer<UInt8>, count: Int) {
            next.update(from: bytes, count: count)
            next += count
        }

        /// `id` as `UUID.uuidString` spells it (upper-case hex, 8-4-4-4-12), without the
        /// formatted printing that costs.
        mutating func appendUUID(_ id: uuid_t) {
            withUnsafeBytes(of: id) { raw in
                for (index, byte) in raw.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        next.pointee = UInt8(ascii: "-")
                        next += 1
                    }
                    next[0] = hexDigits[Int(byte >> 4)]
                    next[1] = hexDigits[Int(byte & 0x0F)]
                    next += 2
                }
            }
        }

        /// `text` with `&`, `<` and `>` as entities (checked by ``escapedCount(of:)`` first).
        mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
            guard let base = utf8.baseAddress else { return }
            var start = 0
            while let special = nextSpecial(in: utf8, from: start) {
                append(base + start, count: special - start)
                switch utf8[special] {
                case UInt8(ascii: "&"): append("&amp;")
                case UInt8(ascii: "<"): append("&lt;")
                case UInt8(ascii: ">"): append("&gt;")
                default: append(base + special, count: 1)  // a tab or a line feed
                }
                start = special + 1
            }
            append(base + start, count: utf8.count - start)
        }
    }

    /// How many bytes the UTF-8 text `utf8` takes escaped, or nil for a control character other
    /// than tab and line feed.
    private static func escapedCount(of utf8: UnsafeBufferPointer<UInt8>) -> Int? {
        var count = utf8.count
        var start = 0
        while let special = nextSpecial(in: utf8, from: start) {
            switch utf8[special] {
            case UInt8(ascii: "&"): count += 4
            case UInt8(ascii: "<"), UInt8(ascii: ">"): count += 3
            case UInt8(ascii: "\t"), UInt8(ascii: "\n"): break
            default: return nil
            }
            start = special + 1
        }
        return count
    }

    /// Whether `bytes` are valid UTF-8: ASCII is checked eight bytes at a time, and only a title
    /// with other bytes goes through the standard library's validation.
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return true }
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= bytes.count {
            high |= base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            high |= UInt64(bytes[index])
            index += 1
        }
        return high & repeated(0x80) == 0 || String(validating: bytes, as: UTF8.self) != nil
    }

    /// The index of the first byte at or after `start` that is `&`, `<`, `>` or below 0x20, or
    /// nil. Sixteen bytes at a time (one SSE2 compare each): a block with none of them is
    /// skipped whole.
    private static func nextSpecial(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return nil }
        let ampersand = SIMD16<UInt8>(repeating: UInt8(ascii: "&"))
        let lessThan = SIMD16<UInt8>(repeating: UInt8(ascii: "<"))
        let greaterThan = SIMD16<UInt8>(repeating: UInt8(ascii: ">"))
        let space = SIMD16<UInt8>(repeating: 0x20)
        var index = start
        while index + 16 <= bytes.count {
            let block = base.loadUnaligned(fromByteOffset: index, as: SIMD16<UInt8>.self)
            let special = (block .== ampersand) .| (block .== lessThan) .| (block .== greaterThan) .| (block .< space)
            if any(special) { break }  // one of these sixteen is special: find it byte by byte
            index += 16
        }
        while index < bytes.count {
            if isSpecial(bytes[index]) { return index }
            index += 1
        }
        return nil
    }

    private static func isSpecial(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "&") || byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">")
    }

    /// `byte` in each of a word's eight bytes.
    private static func repeated(_ byte: UInt8) -> UInt64 { 0x0101_0101_0101_0101 &* UInt64(byte) }

    private static let uuidLength = 36
    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
    private static let header: StaticString = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">

        """
    private static let emptyArray: StaticString = "<array/>\n</plist>\n"
    private static let array: StaticString = "<array>\n"
    private static let end: StaticString = "</array>\n</plist>\n"
    private static let doneTrue: StaticString = "\t<dict>\n\t\t<key>done</key>\n\t\t<true/>\n\t\t<key>id</key>\n\t\t<string>"
    private static let doneFalse: StaticString = "\t<dict>\n\t\t<key>done</key>\n\t\t<false/>\n\t\t<key>id</key>\n\t\t<string>"
    private static let betweenIDAndTitle: StaticString = "</string>\n\t\t<key>title</key>\n\t\t<string>"
    private static let afterTitle: StaticString = "</string>\n\t</dict>\n"
}
