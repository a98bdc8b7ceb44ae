import Foundation
import ListrKit
import Testing

@Suite("Dump format: XML property list")
struct ItemPropertyListTests {
    private let items = [
        Item(id: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!, title: "Milk", done: false),
        Item(title: "Bread & <butter>", done: true),
    ]

    private func plist(_ body: String) -> Data {
        Data("""
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">\(body)</plist>
        """.utf8)
    }

    @Test("a dump is an XML property list: an array of dicts with id, title and done")
    func dumpStructure() throws {
        let data = try ItemPropertyList.encode(items)
        #expect(String(decoding: data.prefix(5), as: UTF8.self) == "<?xml")
        var format = PropertyListSerialization.PropertyListFormat.binary
        let root = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        #expect(format == .xml)
        let array = try #require(root as? [[String: Any]])
        #expect(array.count == 2)
        #expect(array[0]["id"] as? String == "6F9619FF-8B86-D011-B42D-00C04FC964FF")
        #expect(array[0]["title"] as? String == "Milk")
        #expect(array[0]["done"] as? Bool == false)
        #expect(array[1]["done"] as? Bool == true)
        #expect(Set(array[1].keys) == ["id", "title", "done"])
    }

    @Test("decode(encode(items)) gives the same items, ids included")
    func roundTrip() throws {
        #expect(try ItemPropertyList.decode(ItemPropertyList.encode(items)) == items)
        #expect(try ItemPropertyList.decode(ItemPropertyList.encode([])) == [])
    }

    @Test("a hand-written property list decodes")
    func handWritten() throws {
        let data = plist("""
        <array><dict><key>id</key><string>6F9619FF-8B86-D011-B42D-00C04FC964FF</string>
        <key>title</key><string>Milk</string><key>done</key><true/></dict></array>
        """)
        #expect(try ItemPropertyList.decode(data) == [Item(id: items[0].id, title: "Milk", done: true)])
    }

    @Test("malformed property lists are refused with the reason", arguments: [
        ("not a plist", "not a property list"),
        (#"<plist version="1.0"><dict/></plist>"#, "the root is not an array"),
        (#"<plist version="1.0"><array><string>x</string></array></plist>"#, "item 1 is not a dict"),
        (#"<plist version="1.0"><array><dict><key>id</key><string>6F9619FF-8B86-D011-B42D-00C04FC964FF</string><key>done</key><false/></dict></array></plist>"#,
         #"item 1 has no "title""#),
        (#"<plist version="1.0"><array><dict><key>id</key><string>6F9619FF-8B86-D011-B42D-00C04FC964FF</string><key>title</key><string>a</string><key>done</key><string>yes</string></dict></array></plist>"#,
         #"the "done" of item 1 is not a boolean"#),
        (#"<plist version="1.0"><array><dict><key>id</key><string>nope</string><key>title</key><string>a</string><key>done</key><false/></dict></array></plist>"#,
         #"the id of item 1, "nope", is not a UUID"#),
        (#"<plist version="1.0"><array><dict><key>id</key><string>6F9619FF-8B86-D011-B42D-00C04FC964FF</string><key>title</key><string> </string><key>done</key><false/></dict></array></plist>"#,
         "item 1 has an unusable title"),
    ])
    func refusesMalformed(_ input: String, _ reason: String) {
        #expect {
            try ItemPropertyList.decode(Data(input.utf8))
        } throws: { error in
            guard case let ListrError.invalidPropertyList(actual) = error else { return false }
            return actual.contains(reason)
        }
    }

    @Test("two items with one id are refused")
    func refusesDuplicateIDs() throws {
        let twice = try ItemPropertyList.encode([items[0], items[0]])
        #expect(throws: ListrError.invalidPropertyList(reason: "items 1 and 2 have the same id 6F9619FF-8B86-D011-B42D-00C04FC964FF")) {
            try ItemPropertyList.decode(twice)
        }
    }
}
