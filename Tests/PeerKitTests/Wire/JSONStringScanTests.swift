import Foundation
import NIOCore
import Testing
@testable import PeerKit

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
            let bytes = (0..<Int.random(in: 0..<40, using: &generator)).map { _ in
                Int.random(in: 0..<10, using: &generator) == 0 ? (pool.randomElement(using: &generator) ?? 0) : UInt8.random(in: 0x23...0x5B, using: &generator)
            }
            let start = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &generator)
            let found = bytes.withUnsafeBytes { JSONStringScan.firstSpecialByte(in: $0, from: start, to: bytes.count) }
            #expect(found == naive(bytes, from: start), "bytes \(bytes) from \(start)")
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
}
