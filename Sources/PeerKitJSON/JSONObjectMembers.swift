/// The members of one JSON object, found in one pass: each name's byte range and where its value
/// starts, and for larger objects a hash table from name to member, so every lookup costs the same
/// however many members the object has.
///
/// Names compare as Swift strings compare (canonical equivalence), as in `JSONDecoder`, which keys
/// its dictionaries by `String`; the first of repeated names wins, as in `JSONDecoder`. Plain ASCII
/// names without escapes, by far the common case, are compared byte by byte without making strings.
struct JSONObjectMembers {
    /// One member: its name (the offsets of its quotes) and where its value starts.
    struct Member {
        var nameStart: Int
        var nameEnd: Int
        var value: Int
        /// The name is ASCII without escapes, so its bytes are its text.
        var isPlain: Bool
    }

    /// Objects with more members than this get a hash table; smaller ones are searched in order.
    static let linearSearchLimit = 12

    let document: JSONDocument
    let members: [Member]
    /// The index in `members` of the first member of each name; only for larger objects.
    private let firstByName: [String: Int]?

    /// Indexes the object whose opening brace is at `offset` (its syntax was checked before).
    init(objectAt offset: Int, in document: JSONDocument) throws(JSONSyntaxError) {
        self.document = document
        let reader = document.reader
        var members: [Member] = []
        // Room for a small object's members at once: growing from empty takes two allocations
        // for two members, three for four.
        members.reserveCapacity(8)
        var cursor = JSONMemberCursor(objectAt: offset, in: reader)
        while let member = try cursor.next() {
            unsafe members.append(Member(nameStart: member.nameStart, nameEnd: member.nameEnd, value: member.value, isPlain: Self.isPlain(reader.bytes, member.nameStart + 1, member.nameEnd - 1)))
            document.count(member.nameEnd - member.nameStart)
            try cursor.valueEnds(at: try document.valueEnd(at: member.value))
        }
        self.members = members
        if members.count > Self.linearSearchLimit {
            var table: [String: Int] = [:]
            table.reserveCapacity(members.count)
            for (position, member) in members.enumerated() {
                let name = try reader.string(at: member.nameStart)
                document.count(member.nameEnd - member.nameStart)
                if table[name] == nil { table[name] = position }
            }
            firstByName = table
        } else {
            firstByName = nil
        }
    }

    /// Where the value of the first member named `name` starts, or nil.
    func valueOffset(forName name: String) -> Int? {
        if let firstByName {
            document.count(1)
            return firstByName[name].map { members[$0].value }
        }
        var name = name
        return name.withUTF8 { utf8 in unsafe valueOffset(forUTF8: utf8) }
    }

    /// Where the value of the first member named `name` starts, or nil: for a name spelt in
    /// the source, without making a `String` of it unless the object is a large one.
    func valueOffset(forName name: StaticString) -> Int? {
        if let firstByName {
            document.count(1)
            return firstByName[name.description].map { members[$0].value }
        }
        return name.withUTF8Buffer { utf8 in unsafe valueOffset(forUTF8: utf8) }
    }

    /// Where the value of the first member whose name is the UTF-8 text `name` starts, or nil,
    /// searching in order (objects without a hash table).
    private func valueOffset(forUTF8 name: UnsafeBufferPointer<UInt8>) -> Int? {
        document.count(1)
        let nameIsPlain = unsafe Self.isPlain(UnsafeRawBufferPointer(name), 0, name.count)
        for member in members where unsafe matches(member, name, nameIsPlain: nameIsPlain) {
            return member.value
        }
        return nil
    }

    /// The distinct names, in the order they first appear.
    func names() -> [String] {
        let reader = document.reader
        var names: [String] = []
        for (position, member) in members.enumerated() {
            guard let name = try? reader.string(at: member.nameStart) else { continue }
            document.count(member.nameEnd - member.nameStart)
            if let firstByName {
                if firstByName[name] == position { names.append(name) }
            } else if !names.contains(name) {
                names.append(name)
            }
        }
        return names
    }

    private func matches(_ member: Member, _ name: UnsafeBufferPointer<UInt8>, nameIsPlain: Bool) -> Bool {
        document.count(1)
        let reader = document.reader
        if member.isPlain && nameIsPlain {
            let length = member.nameEnd - member.nameStart - 2
            guard length == name.count else { return false }
            for offset in 0..<length where unsafe reader.bytes[member.nameStart + 1 + offset] != name[offset] {
                return false
            }
            return true
        }
        // Escapes or non-ASCII text: compare as strings (canonical equivalence, as JSONDecoder does).
        document.count(member.nameEnd - member.nameStart)
        return unsafe (try? reader.string(at: member.nameStart)) == String(decoding: name, as: UTF8.self)
    }

    /// Whether `bytes[start..<end]` are ASCII without a backslash.
    private static func isPlain(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        for index in start..<end where unsafe bytes[index] >= 0x80 || bytes[index] == UInt8(ascii: "\\") {
            return false
        }
        return true
    }
}
