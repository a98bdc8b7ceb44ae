import Foundation
import NIOCore
import Testing
@testable import PeerKitJSON

/// A coding key of any name, for the hand-written `encode(to:)` of the codec tests.
struct AnyNameKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// What the codec suites compare a value's JSON with: PeerKit's encoder against Foundation's
/// `JSONEncoder`, as text or as documents whatever their key order.
protocol JSONComparing {}

extension JSONComparing {
    /// The value as ``PayloadEncoder`` writes it.
    func peerKit<T: Encodable>(_ value: T) throws -> String {
        String(buffer: try PayloadEncoder.encode(value))
    }

    /// The value as `JSONEncoder` writes it, with the options PeerKit's output follows.
    func foundation<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Parses JSON text into Foundation objects, to compare documents whatever their key order.
    func tree(_ json: String) throws -> NSObject {
        try #require(JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) as? NSObject)
    }
}
