import Foundation
import NIOCore
@testable import PeerKit
@testable import PeerKitJSON

// The JSON path a peer's bytes take: EnvelopeParser.parse on the frame body, then MessageCodec.decode
// of the payload into representative Codable types (as the transceiver does, syntaxChecked: true),
// and PayloadDecoder on the whole input as an unchecked payload. Checks: no crash, and every value
// that decodes re-encodes (PayloadEncoder) to JSON that decodes to the same value.

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
        check(Envelope.self, envelope.payload, syntaxChecked: true)
        check(Command.self, envelope.payload, syntaxChecked: true)
        check([String: Int].self, envelope.payload, syntaxChecked: true)
        check([Double?].self, envelope.payload, syntaxChecked: true)
        // The protocol's own payloads go through the same codec (a peer chooses their bytes too).
        check(Hello.self, envelope.payload, syntaxChecked: true)
        check(GroupSnapshot.self, envelope.payload, syntaxChecked: true)
    }
    check(Item.self, frame, syntaxChecked: false)
    check([String: [Int64]].self, frame, syntaxChecked: false)
    check(Decimal.self, frame, syntaxChecked: false)
    return 0
}
