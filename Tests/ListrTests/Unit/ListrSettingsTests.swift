import Foundation
import ListrKit
import Testing

@Suite("ListrSettings: keys, values and their rules")
struct ListrSettingsTests {
    @Test("set takes each key's value as text")
    func setsEveryKey() throws {
        var settings = ListrSettings.defaults
        try settings.set("log-level", to: "warning")
        try settings.set("name", to: "Kitchen")
        try settings.set("item-limit", to: "500")
        #expect(settings == ListrSettings(logLevel: .warning, name: "Kitchen", itemLimit: 500))
        #expect(settings.rendered == "log-level: warning\nname: Kitchen\nitem-limit: 500")
    }

    @Test("a wrong key or value is refused with a sentence and changes nothing", arguments: [
        ("colour", "red", "There is no setting \"colour\""),
        ("log-level", "loud", "the levels are trace, debug, info, notice, warning, error, critical"),
        ("item-limit", "ten", "it is not a whole number"),
        ("item-limit", "0", "the limit is between 1 and 10000000"),
        ("item-limit", "10000001", "the limit is between 1 and 10000000"),
        ("name", "  ", "it is blank"),
        ("name", "two\nlines", "it contains a control character"),
        ("name", String(repeating: "x", count: 64), "it is 64 bytes long and a name has at most 63"),
    ])
    func refuses(_ key: String, _ value: String, _ reason: String) {
        var settings = ListrSettings.defaults
        #expect {
            try settings.set(key, to: value)
        } throws: { error in
            "\(error)".contains(reason) && "\(error)".hasSuffix("Nothing was changed.")
        }
        #expect(settings == .defaults)
    }

    @Test("stored JSON decodes, a missing key takes its default, and a bad value is refused")
    func decoding() throws {
        let decoder = JSONDecoder()
        let full = #"{"itemLimit":7,"logLevel":"debug","name":"Shed"}"#
        #expect(try decoder.decode(ListrSettings.self, from: Data(full.utf8)) == ListrSettings(logLevel: .debug, name: "Shed", itemLimit: 7))
        #expect(try decoder.decode(ListrSettings.self, from: Data(#"{"name":"Shed"}"#.utf8)).itemLimit == ListrSettings.defaults.itemLimit)
        #expect(throws: DecodingError.self) { try decoder.decode(ListrSettings.self, from: Data(#"{"itemLimit":-1}"#.utf8)) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(ListrSettings(logLevel: .debug, name: "Shed", itemLimit: 7)), as: UTF8.self) == full)
    }
}
