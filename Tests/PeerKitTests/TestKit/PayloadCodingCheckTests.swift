import PeerKit
import PeerKitTesting
import Testing

/// `PayloadCodingCheck` passes a type whose two codings agree, and names the crossing where they
/// do not.
@Suite("PayloadCodingCheck holds a type's own payload coding to its Codable conformance")
struct PayloadCodingCheckTests {
    struct AddItemCommand: Codable, Equatable, PeerPayloadCodable {
        let title: String
        let priority: Int
        let note: String?

        func encode(to payload: inout PayloadWriter) throws {
            payload.write(title, forKey: "title")
            payload.write(priority, forKey: "priority")
            try payload.writeIfPresent(note, forKey: "note")
        }

        init(title: String, priority: Int, note: String?) {
            self.title = title
            self.priority = priority
            self.note = note
        }

        init(from payload: PayloadReader) throws {
            title = try payload.read(String.self, forKey: "title")
            priority = try payload.read(Int.self, forKey: "priority")
            note = try payload.readIfPresent(String.self, forKey: "note")
        }
    }

    /// Writes and reads "name" where its `Codable` conformance has "title": agrees with itself only.
    struct Misspelt: Codable, Equatable, PeerPayloadCodable {
        let title: String

        init(title: String) { self.title = title }
        func encode(to payload: inout PayloadWriter) throws { payload.write(title, forKey: "name") }
        init(from payload: PayloadReader) throws { title = try payload.read(String.self, forKey: "name") }
    }

    /// Writes its note, but never reads it back.
    struct Forgetful: Codable, Equatable, PeerPayloadCodable {
        let note: String?

        init(note: String?) { self.note = note }
        func encode(to payload: inout PayloadWriter) throws { try payload.writeIfPresent(note, forKey: "note") }
        init(from payload: PayloadReader) throws { note = nil }
    }

    @Test("a type whose codings agree passes, with and without its optional member")
    func agreeing() throws {
        try PayloadCodingCheck.verify(AddItemCommand(title: "Milk", priority: 2, note: nil))
        try PayloadCodingCheck.verify(AddItemCommand(title: "Tea \"Earl Grey\", é", priority: -1, note: "loose"))
    }

    @Test("a key its own coding spells differently is named, with the crossing that failed")
    func misspeltKey() {
        #expect {
            try PayloadCodingCheck.verify(Misspelt(title: "Milk"))
        } throws: { error in
            let text = "\(error)"
            return error is PayloadCodingMismatch
                && text.contains(#"its own payload, read through Decodable, should give Misspelt(title: "Milk"), but failed."#)
                && text.contains(#"the key "title" is missing"#)
                && text.contains(#"Its own payload: {"name":"Milk"}; its Encodable payload: {"title":"Milk"}"#)
        }
    }

    @Test("a member its own coding does not read back is found")
    func memberNotRead() throws {
        try PayloadCodingCheck.verify(Forgetful(note: nil))
        #expect {
            try PayloadCodingCheck.verify(Forgetful(note: "x"))
        } throws: { error in
            "\(error)".contains(#"its own payload, read by its own coding, should give Forgetful(note: Optional("x")), but gave Forgetful(note: nil)."#)
        }
    }
}
