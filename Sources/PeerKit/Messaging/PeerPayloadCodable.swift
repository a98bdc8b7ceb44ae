/// A message type that writes its own payload, instead of PeerKit encoding it through
/// `Encodable`.
///
/// PeerKit encodes every message with its `Encodable` conformance unless the type conforms to
/// this protocol; then it calls ``encode(to:)`` instead, which writes the payload's members
/// straight into the frame, skipping `Encodable`'s generic containers: on a 100-byte message
/// that saves about 0.35 µs of the sender's CPU (see `Documentation/Performance.md`). The wire format
/// does not change: the payload is the same JSON object, and a peer decoding it through
/// `Decodable` reads it as before.
///
/// Write the members the type's `Encodable` conformance writes, under the same keys. PeerKit's
/// own frames use the conformance wherever the value is nested inside another value.
///
/// ```swift
/// struct AddItemCommand: Codable, PeerPayloadCodable {
///     let title: String
///     let priority: Int
///
///     func encode(to payload: inout PayloadWriter) throws {
///         payload.write(title, forKey: "title")
///         payload.write(priority, forKey: "priority")
///     }
///
///     init(from payload: PayloadReader) throws {
///         title = try payload.read(String.self, forKey: "title")
///         priority = try payload.read(Int.self, forKey: "priority")
///     }
/// }
/// ```
public protocol PeerPayloadEncodable: Encodable {
    /// Writes this value's members into `payload`, a JSON object.
    ///
    /// - Throws: what ``PayloadWriter``'s writes throw (a number JSON cannot hold, a nested value
    ///   whose encoding fails); PeerKit's call then throws ``PeerKitError/encodingFailed(type:reason:)``.
    func encode(to payload: inout PayloadWriter) throws
}

/// A message type that reads its own payload, instead of PeerKit decoding it through `Decodable`.
///
/// PeerKit decodes every message with its `Decodable` conformance unless the type conforms to
/// this protocol; then it calls ``init(from:)`` instead, which reads the members where they lie
/// in the frame (on a 100-byte message, about 0.43 µs less of the receiver's CPU).
/// ``PayloadReader`` reads as `Decodable`'s keyed container does: keys in any
/// order, unknown keys ignored, the first of repeated keys, and the same errors for a missing
/// key or a value of the wrong type. See ``PeerPayloadEncodable`` for an example.
///
/// Messages are decoded off the caller's isolation, where their handlers run, so the conformance
/// must not be isolated to an actor (`SendableMetatype`), as ``PeerTransceiver``'s `receive`
/// requires of every message type.
public protocol PeerPayloadDecodable: Decodable, SendableMetatype {
    /// Reads a value from its payload's members.
    ///
    /// - Throws: what ``PayloadReader``'s reads throw; PeerKit then drops the message with
    ///   ``PeerKitError/payloadDecodingFailed(type:reason:)``, as for `Decodable` types.
    init(from payload: PayloadReader) throws
}

/// A message type that writes and reads its own payload: ``PeerPayloadEncodable`` and
/// ``PeerPayloadDecodable``.
public typealias PeerPayloadCodable = PeerPayloadEncodable & PeerPayloadDecodable
