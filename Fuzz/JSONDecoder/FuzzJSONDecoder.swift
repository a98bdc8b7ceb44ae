import Foundation
import NIOCore
@testable import PeerKit
@testable import PeerKitJSON

// The JSON path a peer's bytes take: EnvelopeParser.parse on the frame body, then MessageCodec.decode
// of the payload into representative Codable types (as the transceiver does, syntaxChecked: true),
// and PayloadDecoder on the whole input as an unchecked payload. Checks: no crash, every value
// that decodes re-encodes (PayloadEncoder) to JSON that decodes to the same value, and a type's own
// payload coding (OwnItem) agrees with Codable's on every input.

struct Item: Codable, Equatable {
    enum Kind: String, Codable { case task, note }
    var id: Int64
    var title: String
    var done: Bool
    var kind: Kind?
    var score: Double?
    var tags: [String]
    var attributes: [String: Int]?
    var children: [Item]?
}

struct Envelope: Codable, Equatable {
    var items: [Item]
    var counts: [String: UInt64]
    var blob: Data?
    var when: Date?
    var nested: [[Int8]]?
}

/// ``Item`` with its own payload coding (PeerPayloadCodable), under the same wire key: whatever a
/// peer sends, it must decode to the same value as `Item` or fail with the same error, and what it
/// writes must be the bytes `Item`'s `Encodable` conformance writes.
struct OwnItem: PeerPayloadCodable, PeerMessage {
    static var messageType: String { "Item" }
    var item: Item

    init(_ item: Item) { self.item = item }
    func encode(to encoder: any Encoder) throws { try item.encode(to: encoder) }
    init(from decoder: any Decoder) throws { item = try Item(from: decoder) }

    func encode(to payload: inout PayloadWriter) throws {
        payload.write(item.id, forKey: "id")
        payload.write(item.title, forKey: "title")
        payload.write(item.done, forKey: "done")
        try payload.writeIfPresent(item.kind, forKey: "kind")
        try payload.writeIfPresent(item.score, forKey: "score")
        try payload.write(item.tags, forKey: "tags")
        try payload.writeIfPresent(item.attributes, forKey: "attributes")
        try payload.writeIfPresent(item.children, forKey: "children")
    }

    init(from payload: PayloadReader) throws {
        item = Item(id: try payload.read(Int64.self, forKey: "id"),
                    title: try payload.read(String.self, forKey: "title"),
                    done: try payload.read(Bool.self, forKey: "done"),
                    kind: try payload.readIfPresent(Item.Kind.self, forKey: "kind"),
                    score: try payload.readIfPresent(Double.self, forKey: "score"),
                    tags: try payload.read([String].self, forKey: "tags"),
                    attributes: try payload.readIfPresent([String: Int].self, forKey: "attributes"),
                    children: try payload.readIfPresent([Item].self, forKey: "children"))
    }
}

/// Decodes the payload as `Item` and as `OwnItem`: both must give the same value or the same error;
/// a value must be written by `OwnItem` as the bytes `Item` writes.
/// With an envelope, its payload is read as the transceiver reads it (`MessageCodec.decoder(for:)`,
/// with the long string ends the envelope scan found).
func checkOwnCoding(_ payload: ByteBuffer, syntaxChecked: Bool, envelope: PeerKit.Envelope? = nil) {
    let codable = Result { try envelope.map { try MessageCodec.decode(Item.self, from: $0) } ?? MessageCodec.decode(Item.self, from: payload, syntaxChecked: syntaxChecked) }
    let own = Result { try (envelope.map { try MessageCodec.decoder(for: OwnItem.self)($0) } ?? MessageCodec.decode(OwnItem.self, from: payload, syntaxChecked: syntaxChecked)).item }
    switch (codable, own) {
    case let (.success(a), .success(b)):
        precondition(a == b || !isReflexive(a), "Item and OwnItem decoded different values from \(String(buffer: payload))")
        let written = try? MessageCodec.encode(OwnItem(a)).payload
        let expected = try? PayloadEncoder.encode(a)
        precondition(written == expected, "OwnItem wrote \(written.map { String(buffer: $0) } ?? "nothing"), Item \(expected.map { String(buffer: $0) } ?? "nothing")")
    case let (.failure(a), .failure(b)):
        precondition("\(a)" == "\(b)", "Item and OwnItem failed differently on \(String(buffer: payload)): \(a) / \(b)")
    default:
        preconditionFailure("Item and OwnItem disagree on \(String(buffer: payload)): \(codable) / \(own)")
    }
}

enum Command: Codable, Equatable {
    case add(title: String, after: Int?)
    case remove(id: UInt32)
    case clear
}

/// Decodes `T`; when it decodes, checks that it survives an encode/decode round trip unchanged.
func check<T: Codable & Equatable>(_ type: T.Type, _ payload: ByteBuffer, syntaxChecked: Bool) {
    guard let value = try? MessageCodec.decode(T.self, from: payload, syntaxChecked: syntaxChecked) else { return }
    let encoded: ByteBuffer
    do {
        encoded = try PayloadEncoder.encode(value)
    } catch {
        // Only non-finite numbers cannot be encoded, and JSON cannot hold them, so nothing decoded is one.
        preconditionFailure("\(T.self) decoded from the input but does not encode: \(error)")
    }
    let again: T
    do {
        again = try PayloadDecoder.decode(T.self, from: encoded)
    } catch {
        preconditionFailure("\(T.self) re-encoded as \(String(buffer: encoded)) does not decode: \(error)")
    }
    precondition(again == value || !isReflexive(value), "\(T.self) changed in a round trip through \(String(buffer: encoded))")
}

/// False for values that are not equal to themselves (none of these types hold NaN, but stay safe).
func isReflexive<T: Equatable>(_ value: T) -> Bool { value == value }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONDecoder(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let frame = ByteBuffer(bytes: UnsafeBufferPointer(start: start, count: count))
    if let envelope = try? EnvelopeParser.parse(frame) {
        check(Item.self, envelope.payload, syntaxChecked: true)
        checkOwnCoding(envelope.payload, syntaxChecked: true, envelope: envelope)
        check(Envelope.self, envelope.payload, syntaxChecked: true)
        check(Command.self, envelope.payload, syntaxChecked: true)
        check([String: Int].self, envelope.payload, syntaxChecked: true)
        check([Double?].self, envelope.payload, syntaxChecked: true)
        // The protocol's own payloads go through the same codec (a peer chooses their bytes too).
        check(Hello.self, envelope.payload, syntaxChecked: true)
        check(GroupSnapshot.self, envelope.payload, syntaxChecked: true)
    }
    check(Item.self, frame, syntaxChecked: false)
    checkOwnCoding(frame, syntaxChecked: false)
    check([String: [Int64]].self, frame, syntaxChecked: false)
    check(Decimal.self, frame, syntaxChecked: false)
    return 0
}
