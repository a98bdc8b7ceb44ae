import Foundation
@testable import ListrKit
import Testing

@Suite("Listr's fast property list writer writes what PropertyListEncoder writes")
struct ItemPropertyListWriterTests {
    private struct Entry: Codable { var id: String; var title: String; var done: Bool }

    private func foundation(_ items: [Item]) throws -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .xml
        return try encoder.encode(items.map { Entry(id: $0.id.uuidString, title: $0.title, done: $0.done) })
    }

    private func items(_ titles: [String]) -> [Item] {
        titles.enumerated().map { Item(title: $0.element, done: $0.offset % 3 == 0) }
    }

    @Test("byte for byte the same", arguments: [
        [], ["Milk"], [""], ["Bread & <butter>", "\"quoted\" and 'single'", "tab\there", "  spaces  ", "é, 日本語, 🥛, \u{200B}"],
        ["a > b", "&amp; literally", "line\nbreak", "]]>", "<![CDATA[x]]>", "&#38;", "\u{7F} delete", "\u{FEFF}bom"],
        (1...300).map { "item \($0)" },
    ])
    func sameBytes(_ titles: [String]) throws {
        let items = items(titles)
        let written = try #require(ItemPropertyListWriter.data(for: items))
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: try foundation(items), as: UTF8.self))
    }

    @Test("UUIDs are spelled as uuidString spells them")
    func uuids() throws {
        let ids = [UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
                   UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))]
            + (0..<100).map { _ in UUID() }
        let items = ids.map { Item(id: $0, title: "t") }
        #expect(ItemPropertyListWriter.data(for: items) == (try foundation(items)))
    }

    @Test("random titles from a mix of escaped, multi-byte and plain characters come out the same")
    func randomTitles() throws {
        let alphabet = Array("ab <>&;\"'\t\n#x1é日🥛\u{200B}]")
        var generator = SystemRandomNumberGenerator()
        let titles = (0..<500).map { _ in
            String((0..<Int.random(in: 0...40, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" })
        }
        let items = items(titles)
        #expect(ItemPropertyListWriter.data(for: items) == (try foundation(items)))
    }

    @Test("a title with a control character is left to Foundation, and encode still writes it", arguments: ["\r", "a\u{1}b", "\u{0}", "bell\u{7}"])
    func controlCharacters(_ title: String) throws {
        let items = items([title])
        #expect(ItemPropertyListWriter.data(for: items) == nil)
        #expect(try ItemPropertyList.encode(items) == (try foundation(items)))
    }

    @Test("what it writes reads back through the fast reader and through Foundation")
    func roundTrip() throws {
        let items = items(["Milk", "Bread & <butter>", "line\nbreak", "🥛"])
        let data = try #require(ItemPropertyListWriter.data(for: items))
        #expect(ItemPropertyListScanner.entries(in: data)?.map(\.title) == items.map(\.title))
        #expect(try ItemPropertyList.decode(data, checkingRules: false) == items)
        #expect(try PropertyListDecoder().decode([Entry].self, from: data).map(\.title) == items.map(\.title))
    }

    @Test("written in pieces, the property list is the same bytes, its size is known first, and no piece is longer than asked unless one item is", arguments: [1, 64, 300, 4096, 1 << 20])
    func pieces(pieceLength: Int) async throws {
        for titles in [[], ["Milk"], (1...500).map { "item \($0) & <more>" }, ["é 日本語 🥛", String(repeating: "long ", count: 200)]] {
            let items = items(titles)
            let whole = try #require(ItemPropertyListWriter.data(for: items))
            let pieces = try #require(try ItemPropertyListPieces.make(rows: ItemArrayRows(items: items), pieceLength: pieceLength))
            #expect(pieces.size == whole.count)
            var joined = Data()
            var count = 0
            for try await piece in pieces {
                count += 1
                let longestItem = items.compactMap { ItemPropertyListWriter.length(of: $0) }.max() ?? 0
                #expect(piece.readableBytes <= Swift.max(pieceLength, longestItem + ItemPropertyListWriter.headLength(empty: items.isEmpty)))
                #expect(piece.readableBytes > 0)
                joined.append(contentsOf: piece.readableBytesView)
            }
            #expect(joined == whole)
            if pieceLength >= 1 << 20 { #expect(count == 1) }
        }
    }

    @Test("a list with a title only Foundation can write has no pieces (the dump encodes it whole)")
    func piecesNeedTheFastWriter() throws {
        #expect(try ItemPropertyListPieces.make(rows: ItemArrayRows(items: items(["ok", "a\u{1}b"]))) == nil)
    }

    @Test("titles full of characters to escape are written whole, in pieces no longer than asked", arguments: [200, 4096])
    func piecesOfEscapes(pieceLength: Int) async throws {
        let items = items((1...200).map { String(repeating: "&<>", count: $0 % 40) })
        let whole = try #require(ItemPropertyListWriter.data(for: items))
        let pieces = try #require(try ItemPropertyListPieces.make(rows: ItemArrayRows(items: items), pieceLength: pieceLength))
        let longestItem = items.compactMap { ItemPropertyListWriter.length(of: $0) }.max() ?? 0
        var joined = Data()
        for try await piece in pieces {
            #expect(piece.readableBytes <= Swift.max(pieceLength, longestItem + ItemPropertyListWriter.headLength(empty: false)))
            joined.append(contentsOf: piece.readableBytesView)
        }
        #expect(joined == whole)
    }

    @Test("a row whose title is not UTF-8 is left to Foundation, as a control character is")
    func invalidUTF8Rows() throws {
        struct RawRows: ItemRows {
            let titles: [[UInt8]]
            func forEach(after key: Int64, _ body: (ItemRow) -> Bool) {
                for (index, title) in titles.enumerated() where Int64(index + 1) > key {
                    let more = title.withUnsafeBufferPointer { body(ItemRow(key: Int64(index + 1), id: UUID().uuid, title: $0, done: false)) }
                    guard more else { return }
                }
            }
        }
        #expect(try ItemPropertyListPieces.make(rows: RawRows(titles: [Array("ok".utf8), Array("é 🥛".utf8)])) != nil)
        for bad: [UInt8] in [[0x61, 0xFF, 0x62], [0xC3], [0xE6, 0x97], [0xED, 0xA0, 0x80], [0xC0, 0xAF], Array(repeating: 0x61, count: 20) + [0x80]] {
            #expect(try ItemPropertyListPieces.make(rows: RawRows(titles: [Array("ok".utf8), bad])) == nil, "\(bad)")
        }
    }
}
