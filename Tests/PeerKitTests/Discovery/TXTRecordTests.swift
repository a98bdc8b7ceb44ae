import CAvahi
import Testing
@testable import PeerKit

extension DiscoveryTests {
    @Suite("TXT records")
    struct TXTRecordTests {
        private func entries(_ strings: String...) -> [[UInt8]] {
            strings.map { Array($0.utf8) }
        }

        @Test func pairsAreSplitAtTheFirstEqualsSign() {
            let pairs = TXTRecord.pairs(fromEntries: entries("peerid=abc", "proto=1", "url=a=b"))
            #expect(pairs == ["peerid": "abc", "proto": "1", "url": "a=b"])
        }

        @Test func aStringWithoutEqualsSignIsABooleanAttribute() {
            #expect(TXTRecord.pairs(fromEntries: entries("debug", "empty=")) == ["debug": "", "empty": ""])
        }

        @Test func stringsWithoutKeyAreIgnored() {
            #expect(TXTRecord.pairs(fromEntries: entries("", "=value", "k=v")) == ["k": "v"])
        }

        @Test func theFirstOccurrenceOfAKeyWins() {
            #expect(TXTRecord.pairs(fromEntries: entries("k=first", "k=second")) == ["k": "first"])
        }

        @Test func keysThatAreNotUTF8AreIgnored() {
            #expect(TXTRecord.pairs(fromEntries: [[0xFF, 0xFE, UInt8(ascii: "="), UInt8(ascii: "x")], Array("k=v".utf8)]) == ["k": "v"])
        }

        @Test func anAvahiStringListRoundTripsRegardlessOfOrder() {
            let pairs = ["peerid": "0d7c", "proto": "1", "role": "store", "flag": "", "unicode": "Küche"]
            let list = TXTRecord.makeStringList(pairs)
            defer { avahi_string_list_free(list) }
            #expect(TXTRecord.pairs(from: list) == pairs)
        }

        @Test func aPairOf255BytesFitsAndOneMoreByteIsRejected() {
            let value = String(repeating: "x", count: 250)  // "note=" + 250 bytes = 255
            #expect(throws: Never.self) { try TXTRecord.validate(["note": value]) }
            #expect(throws: PeerKitError.invalidDiscoveryInfo(key: "note", reason: "\"key=value\" is 256 bytes long, and a TXT string holds at most 255")) {
                try TXTRecord.validate(["note": value + "y"])
            }
        }
    }
}
