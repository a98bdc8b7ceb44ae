import Foundation
@testable import ListrKit
import Testing

@Suite("The fast reader of Listr's property lists agrees with Foundation")
struct ItemPropertyListScannerTests {
    private struct Entry: Codable { var id: String; var title: String; var done: Bool }

    private func foundation(_ data: Data) throws -> [ItemPropertyListScanner.Entry] {
        try PropertyListDecoder().decode([Entry].self, from: data).map { .init(id: $0.id, title: $0.title, done: $0.done) }
    }

    @Test("what PropertyListEncoder writes reads the same as through Foundation", arguments: [
        ["Milk"], [], ["Bread & <butter>", "\"quoted\" and 'single'", "tab\there", "  spaces  ", "é, 日本語, 🥛, \u{200B}"],
        ["a > b", "&amp; literally", "line\nbreak"], (1...300).map { "item \($0)" },
    ])
    func agrees(_ titles: [String]) throws {
        let items = titles.enumerated().map { Item(title: $0.element, done: $0.offset % 2 == 0) }
        let data = try ItemPropertyList.encode(items)
        let scanned = ItemPropertyListScanner.entries(in: data)
        #expect(scanned != nil, "the scanner does not read what the encoder writes")
        #expect(scanned == (try foundation(data)))
    }

    @Test("hand-written lists in the same shape read the same, entities and character references included")
    func handWritten() throws {
        let data = Data("""
        <plist version="1.0"><array><dict><key>title</key><string>A &#38; B &#x263A; &lt;&gt;</string>
        <key>done</key><true/><key>id</key><string>6F9619FF-8B86-D011-B42D-00C04FC964FF</string></dict></array></plist>
        """.utf8)
        let scanned = try #require(ItemPropertyListScanner.entries(in: data))
        #expect(scanned == (try foundation(data)))
        #expect(scanned.first?.title == "A & B ☺ <>")
    }

    @Test("anything in another shape is left to Foundation", arguments: [
        #"<plist version="1.0"><dict/></plist>"#,
        #"<plist version="1.0"><array><dict><key>id</key><string>x</string><key>title</key><string>t</string></dict></array></plist>"#,
        #"<plist version="1.0"><array><dict><key>id</key><string>x</string><key>title</key><string>t</string><key>done</key><false/><key>more</key><true/></dict></array></plist>"#,
        #"<plist version="1.0"><array><dict><key>id</key><string>x</string><key>id</key><string>y</string><key>done</key><false/></dict></array></plist>"#,
        #"<plist version="1.0"><array><dict><key>id</key><string>x</string><key>title</key><string/><key>done</key><false/></dict></array></plist>"#,
        #"<plist version="1.0"><array><!-- a comment --></array></plist>"#,
        #"<plist version="1.0"><array><dict><key>id</key><string><![CDATA[x]]></string><key>title</key><string>t</string><key>done</key><false/></dict></array></plist>"#,
        #"<plist version="1.0"><array><dict><key>id</key><string>x</string><key>title</key><string>a&nbsp;b</string><key>done</key><false/></dict></array></plist>"#,
        "<plist version=\"1.0\"><array><dict><key>id</key><string>x</string><key>title</key><string>a\r\nb</string><key>done</key><false/></dict></array></plist>",
        #"<plist version="1.0"><array><dict><key>id</key><string>x</string><key>title</key><string>t</string><key>done</key><string>yes</string></dict></array></plist>"#,
        #"<plist version="1.0"><array></array></plist> trailing"#,
        "not a plist",
    ])
    func fallsBack(_ input: String) {
        #expect(ItemPropertyListScanner.entries(in: Data(input.utf8)) == nil)
    }

    @Test("a binary property list is left to Foundation, which reads it")
    func binary() throws {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        let data = try encoder.encode([Entry(id: "6F9619FF-8B86-D011-B42D-00C04FC964FF", title: "Milk", done: true)])
        #expect(ItemPropertyListScanner.entries(in: data) == nil)
        #expect(try ItemPropertyList.decode(data).map(\.title) == ["Milk"])
    }
}
