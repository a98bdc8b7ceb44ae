import NIOConcurrencyHelpers

/// A type that names its own wire key.
///
/// By default a message's wire key is its type name (`String(describing: T.self)`), as in
/// MultipeerKit. Conform to `PeerMessage` when two modules have types of the same name, or when a
/// program in another language expects a particular key:
///
/// ```swift
/// struct AddItemCommand: Codable, PeerMessage {
///     static var messageType: String { "com.example.listr.AddItemCommand" }
///     let title: String
/// }
/// ```
public protocol PeerMessage {
    /// The value of the envelope's `type` key for this type. Must not start with `peerkit.`.
    static var messageType: String { get }
}

/// The wire key of a type: ``PeerMessage/messageType`` when it conforms, else its type name.
///
/// Worked out once per type and remembered: `String(describing:)` and the conformance check cost
/// more than encoding a small message.
public func peerMessageType<T>(of type: T.Type) -> String {
    wireKey(of: type).name
}
