import NIOCore
import PeerKit

/// Holds a ``PeerKit/PeerPayloadCodable`` type's own payload coding to its `Codable` conformance,
/// for a type's tests: peers that decode it through `Decodable` must read what its own coding
/// writes, and its own coding must read what `Encodable` writes.
///
/// ```swift
/// @Test func addItemCodingsAgree() throws {
///     try PayloadCodingCheck.verify(AddItemCommand(title: "Milk", priority: 2, note: nil))
///     try PayloadCodingCheck.verify(AddItemCommand(title: "Tea \"Earl Grey\"", priority: -1, note: "loose"))
/// }
/// ```
public enum PayloadCodingCheck {
    /// Checks that `value` survives every crossing of the two codings: its own payload read back
    /// by its own coding and by `Decodable`, and its `Encodable` payload read by its own coding.
    /// The bytes may differ (keys in another order); the values read must equal `value`.
    ///
    /// - Throws: ``PayloadCodingMismatch`` naming the first crossing that read another value or
    ///   failed, with both payloads.
    public static func verify<T: PeerPayloadCodable & Equatable>(_ value: T) throws {
        let own = try PayloadCodingMismatch.whileWriting("its own coding") { try PayloadCodings.ownPayload(of: value) }
        let codable = try PayloadCodingMismatch.whileWriting("Encodable") { try PayloadCodings.codablePayload(of: value) }
        let crossings: [(String, ByteBuffer, (ByteBuffer) throws -> T)] = [
            ("its own payload, read by its own coding,", own, { try PayloadCodings.readOwn(T.self, from: $0) }),
            ("its own payload, read through Decodable,", own, { try PayloadCodings.readCodable(T.self, from: $0) }),
            ("its Encodable payload, read by its own coding,", codable, { try PayloadCodings.readOwn(T.self, from: $0) }),
        ]
        for (crossing, payload, read) in crossings {
            let result = Result { try read(payload) }
            guard case let .success(readBack) = result, readBack == value else {
                let outcome: String
                switch result {
                case let .success(other): outcome = "gave \(other)."
                case let .failure(error): outcome = "failed. \(error)"
                }
                throw PayloadCodingMismatch(description: "\(T.self)'s own payload coding disagrees with its Codable conformance: "
                    + "\(crossing) should give \(value), but \(outcome) Its own payload: \(String(buffer: own)); its Encodable "
                    + "payload: \(String(buffer: codable)). Write and read the keys its Codable conformance uses.")
            }
        }
    }
}

/// A ``PeerKit/PeerPayloadCodable`` type's two codings disagree (``PayloadCodingCheck/verify(_:)``).
public struct PayloadCodingMismatch: Error, CustomStringConvertible, Sendable {
    /// What disagreed, in a sentence or two, with both payloads.
    public let description: String

    /// The result of `write`, or a mismatch saying that writing the payload with `coding` failed.
    static func whileWriting(_ coding: String, _ write: () throws -> ByteBuffer) throws -> ByteBuffer {
        do {
            return try write()
        } catch {
            throw PayloadCodingMismatch(description: "The payload could not be written with \(coding): \(error)")
        }
    }
}
