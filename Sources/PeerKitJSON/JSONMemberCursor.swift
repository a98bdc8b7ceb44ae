/// Walks the members of one JSON object, checking the syntax around them: each member's name,
/// the ':' after it, and the ',' or '}' after its value.
///
/// The one loop over an object's members, shared by ``JSONReader/skipValue(at:depth:)`` (which
/// checks and skips an object), ``JSONObjectMembers`` (which indexes one for a keyed container)
/// and ``EnvelopeParser`` (which picks the envelope's keys out of one). Each asks for a member,
/// finds where its value ends in its own way (skipping it, looking it up in the document's
/// index), and says so:
///
/// ```swift
/// var cursor = JSONMemberCursor(objectAt: brace, in: reader)
/// while let member = try cursor.next() {
///     try cursor.valueEnds(at: try reader.skipValue(at: member.value))
/// }
/// let end = cursor.end  // just past the closing brace
/// ```
package struct JSONMemberCursor {
    /// One member: its name (the offsets of its opening quote and just past its closing quote)
    /// and where its value starts.
    package struct Member {
        package var nameStart: Int
        package var nameEnd: Int
        package var value: Int
    }

    let reader: JSONReader
    /// What to say when the bytes end after a value, before the ',' or '}'.
    private let truncated: String
    /// Where the next member's name starts; just past the closing brace once done.
    private var index: Int
    private var done: Bool

    /// A cursor on the object whose opening brace is at `brace`.
    package init(objectAt brace: Int, in reader: JSONReader, truncated: String = "an object ends before its closing brace") {
        self.reader = reader
        self.truncated = truncated
        let first = reader.skipWhitespace(from: brace + 1)
        done = reader.byte(at: first) == UInt8(ascii: "}")
        index = done ? first + 1 : first
    }

    /// Just past the object's closing brace, once ``next()`` returned nil.
    package var end: Int { index }

    /// The next member, after checking its name and the ':' after it; nil after the last one.
    /// After a member, call ``valueEnds(at:)`` before asking for the next.
    package mutating func next() throws(JSONSyntaxError) -> Member? {
        guard !done else { return nil }
        let nameStart = index
        guard reader.byte(at: nameStart) == UInt8(ascii: "\"") else {
            guard reader.byte(at: nameStart) != nil else { throw JSONSyntaxError(reason: "an object ends before its closing brace") }
            throw reader.unexpected(at: nameStart, expecting: "a member name")
        }
        let nameEnd = try reader.stringEnd(at: nameStart)
        let colon = reader.skipWhitespace(from: nameEnd)
        guard reader.byte(at: colon) == UInt8(ascii: ":") else {
            guard reader.byte(at: colon) != nil else { throw JSONSyntaxError(reason: "an object ends before its closing brace") }
            throw reader.unexpected(at: colon, expecting: "':'")
        }
        return Member(nameStart: nameStart, nameEnd: nameEnd, value: reader.skipWhitespace(from: colon + 1))
    }

    /// Goes on after the value of the member ``next()`` returned, which ends just before `valueEnd`:
    /// checks the ',' or '}' that must follow.
    package mutating func valueEnds(at valueEnd: Int) throws(JSONSyntaxError) {
        let separator = reader.skipWhitespace(from: valueEnd)
        guard let byte = reader.byte(at: separator) else { throw JSONSyntaxError(reason: truncated) }
        guard byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") else { throw reader.unexpected(at: separator, expecting: "',' or '}'") }
        done = byte == UInt8(ascii: "}")
        index = done ? separator + 1 : reader.skipWhitespace(from: separator + 1)
    }
}
