import Foundation
import NIOCore
import Testing
@testable import PeerKit
@testable import PeerKitJSON

@Suite("Eight-bytes-at-a-time string scan")
struct JSONStringScanTests {
    /// The obvious byte-by-byte answer.
    func naive(_ bytes: [UInt8], from start: Int) -> Int {
        bytes[start...].firstIndex { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 } ?? bytes.count
    }

    @Test("finds the same first special byte as a byte-by-byte scan, on random bytes of every kind")
    func agreesWithNaiveScan() {
        var generator = SystemRandomNumberGenerator()
        // Mostly plain text, sometimes a special byte, sometimes UTF-8 lead/continuation bytes.
        let pool: [UInt8] = Array(0x20...0x7E).filter { $0 != 0x22 && $0 != 0x5C } + [0x22, 0x5C, 0x00, 0x01, 0x1F, 0x0A, 0x80, 0xC3, 0xA9, 0xFF, 0x21, 0x5B, 0x5D]
        for _ in 0..<20_000 {
            // Up to 100 bytes, sometimes with rare hits, so that whole 32-byte blocks are passed
            // over as well as single words and bytes.
            let rarity = Bool.random(using: &generator) ? 10 : 200
            let bytes = (0..<Int.random(in: 0..<100, using: &generator)).map { _ in
                Int.random(in: 0..<rarity, using: &generator) == 0 ? (pool.randomElement(using: &generator) ?? 0) : UInt8.random(in: 0x23...0x5B, using: &generator)
            }
            let start = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &generator)
            let found = bytes.withUnsafeBytes { JSONStringScan.firstSpecialByte(in: $0, from: start, to: bytes.count) }
            #expect(found == naive(bytes, from: start), "bytes \(bytes) from \(start)")
            let foundOrNonASCII = bytes.withUnsafeBytes { JSONStringScan.firstSpecialOrNonASCIIByte(in: $0, from: start, to: bytes.count) }
            let expected = bytes[start...].firstIndex { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 || $0 >= 0x80 } ?? bytes.count
            #expect(foundOrNonASCII == expected, "bytes \(bytes) from \(start), non-ASCII counting")
        }
    }

    @Test("a special character at every offset around the 8-byte words round-trips", arguments: ["\"", "\\", "\n", "\u{01}", "\u{1F}"])
    func everyOffset(special: String) throws {
        for length in 0..<24 {
            for position in 0...length {
                let plain = String(repeating: "a", count: length)
                let value = String(plain.prefix(position)) + special + "é" + String(plain.dropFirst(position))
                let encoded = try PayloadEncoder.encode([value])
                #expect(try JSONDecoder().decode([String].self, from: Data(encoded.readableBytesView)) == [value])
                let foundation = ByteBuffer(data: try JSONEncoder().encode([value]))
                #expect(try PayloadDecoder.decode([String].self, from: foundation) == [value])
            }
        }
    }

    @Test("a long string with no special byte is copied whole, and a raw control byte deep inside is refused")
    func longStrings() throws {
        let long = String(repeating: "0123456789abcdef", count: 4096)
        let encoded = try PayloadEncoder.encode([long])
        #expect(encoded.readableBytes == long.utf8.count + 4)
        #expect(try PayloadDecoder.decode([String].self, from: encoded) == [long])
        var bad = ByteBuffer(string: "[\"" + String(repeating: "x", count: 1000))
        bad.writeInteger(UInt8(0x07))
        bad.writeString("\"]")
        #expect(throws: DecodingError.self) { try PayloadDecoder.decode([String].self, from: bad) }
    }

    @Test("the ASCII check agrees with a byte-by-byte one, with a high byte at every offset")
    func asciiCheck() {
        for length in 0..<40 {
            let plain = [UInt8](repeating: UInt8(ascii: "x"), count: length)
            #expect(plain.withUnsafeBytes(UTF8Text.isASCII), "\(length) plain bytes")
            for position in 0..<length {
                for high: UInt8 in [0x80, 0xC3, 0xFF] {
                    var bytes = plain
                    bytes[position] = high
                    #expect(!bytes.withUnsafeBytes(UTF8Text.isASCII), "0x\(String(high, radix: 16)) at \(position) of \(length)")
                }
            }
        }
    }

    @Test("a string with non-ASCII text, an escape or invalid UTF-8 at every offset of a long ASCII run is read right")
    func stringReadingAroundTheASCIIRun() throws {
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 1000] {
            for position in Set([0, 1, length / 2, max(0, length - 1), length]) where position <= length {
                let plain = String(repeating: "b", count: length)
                for inserted in ["é", "€", "😀", "\n", "\"", "\\"] {
                    let value = String(plain.prefix(position)) + inserted + String(plain.dropFirst(position))
                    let json = try JSONEncoder().encode([value])
                    #expect(try PayloadDecoder.decode([String].self, from: ByteBuffer(data: json)) == [value])
                }
                // A lone continuation byte, an overlong form and a surrogate are refused, wherever they are.
                for invalid: [UInt8] in [[0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80]] {
                    var json = Array("[\"\(plain)\"]".utf8)
                    json.insert(contentsOf: invalid, at: 2 + position)
                    #expect(throws: (any Error).self, "\(invalid) at \(position) of \(length)") {
                        try PayloadDecoder.decode([String].self, from: ByteBuffer(bytes: json))
                    }
                    #expect(throws: (any Error).self, "\(invalid) at \(position) of \(length), when the syntax check is skipped") {
                        try PayloadDecoder.decode([String].self, from: ByteBuffer(bytes: json), syntaxChecked: true)
                    }
                }
            }
        }
    }
}
