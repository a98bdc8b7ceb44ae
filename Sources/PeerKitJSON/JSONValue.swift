import Foundation

/// One JSON value of a payload being decoded: where it starts, and where it sits (its container's
/// path and its key), for its errors and for the coding path of what it opens.
///
/// It reads the scalars itself, and opens containers; a value of any other type is handed to the
/// type's `init(from:)` through a ``JSONValueDecoder``. Containers make one of these for each
/// member they are asked for, which costs nothing but the copy: the path node that ends with its
/// key is only made when a container or a decoder needs it.
struct JSONValue {
    let document: JSONDocument
    /// Where the value starts (no leading whitespace).
    let offset: Int
    /// The path of the container holding this value; nil at the top level.
    let parent: JSONCodingPath?
    /// This value's key in that container; nil at the top level.
    let key: (any CodingKey)?

    var reader: JSONReader { document.reader }
    var codingPath: [any CodingKey] { JSONCodingPath.keys(parent, then: key) }

    /// The value at `offset`, member `key` of the container at `parent`.
    init(document: JSONDocument, offset: Int, parent: JSONCodingPath? = nil, key: (any CodingKey)? = nil) {
        self.document = document
        self.offset = offset
        self.parent = parent
        self.key = key
    }

    /// The path of this value: its container's path ending with its key (one node, made when a
    /// container or a decoder of this value needs it).
    var path: JSONCodingPath? {
        guard let key else { return parent }
        return JSONCodingPath(parent: parent, key: key)
    }

    /// The `Decoder` for this value, at its path.
    var decoder: JSONValueDecoder {
        JSONValueDecoder(document: document, offset: offset, path: path)
    }

    // MARK: Containers

    /// The keyed container of this object, whose members' paths start with `path` (this value's).
    func container<Key: CodingKey>(keyedBy type: Key.Type, path: JSONCodingPath?) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(JSONKeyedContainer<Key>(path: path, members: try objectMembers()))
    }

    /// The members of this object, indexed; a value of another kind throws what a keyed
    /// container of it throws.
    func objectMembers() throws -> JSONObjectMembers {
        try expect(UInt8(ascii: "{"), [String: Any].self)
        return try syntax { () throws(JSONSyntaxError) in try JSONObjectMembers(objectAt: offset, in: document) }
    }

    /// The unkeyed container of this array, whose elements' paths start with `path` (this value's).
    func unkeyedContainer(path: JSONCodingPath?) throws -> any UnkeyedDecodingContainer {
        try expect(UInt8(ascii: "["), [Any].self)
        return JSONUnkeyedContainer(document: document, path: path, elements: try arrayElements())
    }

    // MARK: Values

    /// Decodes `T`, with `JSONDecoder`'s default treatment of the Foundation types it special-cases.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        // One comparison of metatypes first: a struct, array or dictionary (nearly every value
        // decoded) goes to its own `init(from:)` without the dynamic casts of `decodeOwn`.
        guard Self.hasOwnDecoding(T.self) else { return try T(from: decoder) }
        return try decodeOwn(type)
    }

    /// Decodes a value of one of the types ``hasOwnDecoding(_:)`` names. Kept apart from
    /// ``decodeValue(_:)``: its casts to `T?` make the runtime look up `Optional<T>`'s metadata
    /// on entry, which every other value would pay too.
    @inline(never)
    func decodeOwn<T: Decodable>(_ type: T.Type) throws -> T {
        // The types below are all structs, so a type is one of them exactly when it is equal to it.
        switch type {
        case is String.Type: if let value = try decode(String.self) as? T { return value }
        case is Int.Type: if let value = try decode(Int.self) as? T { return value }
        case is Double.Type: if let value = try decode(Double.self) as? T { return value }
        case is Bool.Type: if let value = try decode(Bool.self) as? T { return value }
        case is Data.Type:
            // Decode the Base64 bytes between the quotes directly, unless an encoder escaped
            // them (JSONEncoder writes '/' as "\/" by default).
            guard reader.byte(at: offset) == UInt8(ascii: "\"") else { throw mismatch(Data.self) }
            let end = try syntax { () throws(JSONSyntaxError) in try document.stringEnd(at: offset) }
            let raw = unsafe UnsafeRawBufferPointer(rebasing: reader.bytes[(offset + 1)..<(end - 1)])
            let encoded = unsafe JSONReader.containsBackslash(raw) ? Data(try decode(String.self).utf8) : Data(raw)
            guard let data = Data(base64Encoded: encoded) else { throw corrupted("Encountered Data is not valid Base64.") }
            if let value = data as? T { return value }
        case is Date.Type:
            if let value = Date(timeIntervalSinceReferenceDate: try decode(Double.self)) as? T { return value }
        case is URL.Type:
            let text = try decode(String.self)
            guard let url = URL(string: text) else { throw corrupted("Invalid URL string.") }
            if let value = url as? T { return value }
        case is Decimal.Type:
            let text = try numberText(Decimal.self)
            guard let decimal = Decimal(string: text) else { throw corrupted("Parsed JSON number <\(text)> is not a valid Decimal.") }
            if let value = decimal as? T { return value }
        default:
            break
        }
        return try T(from: decoder)
    }

    /// Whether values of `type` are read here rather than by their own `init(from:)`.
    static func hasOwnDecoding(_ type: Any.Type) -> Bool {
        type == String.self || type == Int.self || type == Double.self || type == Bool.self
            || type == Data.self || type == Date.self || type == URL.self || type == Decimal.self
    }

    func decodeNil() -> Bool {
        reader.byte(at: offset) == UInt8(ascii: "n")
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        switch reader.byte(at: offset) {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: throw mismatch(Bool.self)
        }
    }

    func decode(_ type: String.Type) throws -> String {
        guard reader.byte(at: offset) == UInt8(ascii: "\"") else { throw mismatch(String.self) }
        return try syntax { () throws(JSONSyntaxError) in try document.string(at: offset) }
    }

    func decode(_ type: Double.Type) throws -> Double { try floatingPoint(Double.self) }
    func decode(_ type: Float.Type) throws -> Float { try floatingPoint(Float.self) }
    func decode(_ type: Int.Type) throws -> Int { try integer(Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(UInt64.self) }

    // MARK: Numbers

    private func numberText<T>(_ type: T.Type) throws -> String {
        guard let first = reader.byte(at: offset), first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw mismatch(T.self)
        }
        let end = try syntax { () throws(JSONSyntaxError) in try reader.numberEnd(at: offset) }
        return unsafe String(decoding: UnsafeRawBufferPointer(rebasing: reader.bytes[offset..<end]), as: UTF8.self)
    }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard let first = reader.byte(at: offset), first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw mismatch(T.self)
        }
        var index = offset
        let negative = first == UInt8(ascii: "-")
        if negative { index += 1 }
        var value: T = 0
        var overflow = false
        while let byte = reader.byte(at: index), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
            let digit = T(byte - UInt8(ascii: "0"))
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            overflow = overflow || o1 || o2
            value = next
            index += 1
        }
        if let byte = reader.byte(at: index), byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            // 1.0 or 1e3: accept when it denotes a whole number that fits, computed exactly
            // (never through Double, which would round integers above 2^53).
            let end = try syntax { () throws(JSONSyntaxError) in try reader.numberEnd(at: offset) }
            guard let exact = unsafe Self.exactInteger(UnsafeRawBufferPointer(rebasing: reader.bytes[offset..<end]), as: T.self) else {
                throw corrupted("Parsed JSON number <\(try numberText(T.self))> is not a whole number that fits in \(T.self).")
            }
            return exact
        }
        guard !overflow else { throw corrupted("Parsed JSON number <\((try? numberText(T.self)) ?? "?")> does not fit in \(T.self).") }
        return value
    }

    /// The integer that the JSON number `text` (with a fraction or an exponent) denotes exactly,
    /// or nil when that is not a whole number or does not fit in `T`.
    static func exactInteger<T: FixedWidthInteger>(_ text: UnsafeRawBufferPointer, as type: T.Type) -> T? {
        var index = 0
        func isDigit(_ index: Int) -> Bool { unsafe index < text.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[index]) }
        let negative = unsafe text.first == UInt8(ascii: "-")
        if negative { index += 1 }
        // The significant digits (without leading zeros) and the power of ten they are scaled by.
        var digits: [UInt8] = []
        var scale = 0
        while isDigit(index) {
            let digit = unsafe text[index] - UInt8(ascii: "0")
            if !(digits.isEmpty && digit == 0) { digits.append(digit) }
            index += 1
        }
        if index < text.count, unsafe text[index] == UInt8(ascii: ".") {
            index += 1
            while isDigit(index) {
                let digit = unsafe text[index] - UInt8(ascii: "0")
                if !(digits.isEmpty && digit == 0) { digits.append(digit) }
                scale -= 1
                index += 1
            }
        }
        if index < text.count, unsafe text[index] == UInt8(ascii: "e") || text[index] == UInt8(ascii: "E") {
            index += 1
            var exponentNegative = false
            if index < text.count, unsafe text[index] == UInt8(ascii: "+") || text[index] == UInt8(ascii: "-") {
                exponentNegative = unsafe text[index] == UInt8(ascii: "-")
                index += 1
            }
            // Saturate: any exponent beyond this makes a nonzero value overflow or a fraction.
            var exponent = 0
            while isDigit(index) {
                exponent = unsafe min(exponent * 10 + Int(text[index] - UInt8(ascii: "0")), 1_000_000_000)
                index += 1
            }
            scale += exponentNegative ? -exponent : exponent
        }
        while digits.last == 0 {
            digits.removeLast()
            scale += 1
        }
        if digits.isEmpty { return 0 }
        // A fraction, or more digits than any value of T has.
        guard scale >= 0, digits.count + scale <= T.bitWidth else { return nil }
        var value: T = 0
        for digit in digits + repeatElement(0, count: scale) {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times10.subtractingReportingOverflow(T(digit)) : times10.addingReportingOverflow(T(digit))
            guard !o1, !o2 else { return nil }
            value = next
        }
        return value
    }

    private func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ type: T.Type) throws -> T {
        let text = try numberText(T.self)
        guard let value = T(text), value.isFinite else {
            throw corrupted("Parsed JSON number <\(text)> does not fit in \(T.self).")
        }
        return value
    }

    // MARK: Container syntax

    private func expect<T>(_ opening: UInt8, _ type: T.Type) throws {
        guard reader.byte(at: offset) == opening else { throw mismatch(type) }
    }

    private func arrayElements() throws -> [Int] {
        try syntax { () throws(JSONSyntaxError) in
            var elements: [Int] = []
            var index = reader.skipWhitespace(from: offset + 1)
            if reader.byte(at: index) == UInt8(ascii: "]") { return elements }
            while true {
                elements.append(index)
                index = reader.skipWhitespace(from: try document.valueEnd(at: index))
                guard reader.byte(at: index) == UInt8(ascii: ",") else { return elements }
                index = reader.skipWhitespace(from: index + 1)
            }
        }
    }

    /// Runs `body`, turning a syntax error into `DecodingError.dataCorrupted` at this value's path.
    func syntax<T>(_ body: () throws(JSONSyntaxError) -> T) throws -> T {
        do throws(JSONSyntaxError) {
            return try body()
        } catch {
            throw corrupted(error.reason)
        }
    }

    // MARK: Errors

    func mismatch<T>(_ type: T.Type) -> DecodingError {
        let found: String
        switch reader.byte(at: offset) {
        case UInt8(ascii: "n"):
            return .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "Expected \(type) value but found null instead."))
        case UInt8(ascii: "\""): found = "a string"
        case UInt8(ascii: "{"): found = "a dictionary"
        case UInt8(ascii: "["): found = "an array"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): found = "a bool"
        default: found = "a number"
        }
        return .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Expected to decode \(type) but found \(found) instead."))
    }

    func corrupted(_ description: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: description))
    }
}

/// A coding key for array elements and `super`; its text is only made when asked for.
struct JSONIndexKey: CodingKey {
    private let index: Int
    private let isSuper: Bool

    init?(stringValue: String) {
        guard stringValue == "super" else { return nil }
        self.index = 0
        self.isSuper = true
    }

    init(intValue: Int) {
        self.index = intValue
        self.isSuper = false
    }

    var stringValue: String { isSuper ? "super" : "Index \(index)" }
    var intValue: Int? { isSuper ? nil : index }
    static let `super` = JSONIndexKey(superKey: ())

    private init(superKey: Void) {
        self.index = 0
        self.isSuper = true
    }
}
