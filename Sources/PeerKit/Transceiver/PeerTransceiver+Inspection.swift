import Foundation
import NIOCore

/// A message seen as its wire key and JSON text, for tools that handle any type (the `peerkit`
/// inspector) rather than Swift types known at compile time.
public struct RawPeerMessage: Sendable, Hashable {
    /// The wire key (the envelope's `type`).
    public var type: String
    /// The payload as JSON text.
    public var json: String

    /// A message of wire key `type` whose payload is the JSON text `json`.
    public init(type: String, json: String) {
        self.type = type
        self.json = json
    }
}

extension PeerTransceiver {
    /// Registers `handler` for every message whose wire key has no handler of its own.
    ///
    /// Messages arriving as requests are handed over too, and not answered: the requester's
    /// ``request(_:to:expecting:timeout:)`` times out. Pass `nil` to remove the handler.
    public func receiveUnhandled(using handler: (@Sendable (_ message: RawPeerMessage, _ sender: Peer) async -> Void)?) {
        guard let handler else {
            registry.setFallback(nil)
            return
        }
        registry.setFallback { type, payload, sender in
            await handler(RawPeerMessage(type: type, json: String(buffer: payload)), sender)
        }
    }

    /// Sends `message` to each of `peers`, as `send(_:to:)` does for a Swift value.
    /// - Throws: ``PeerKitError/encodingFailed(type:reason:)`` when the wire key is empty or
    ///   reserved, or the text is not JSON; ``PeerKitError/peerNotConnected(peer:)`` (or, for a
    ///   peer whose last connection ended badly and recently, that reason) or
    ///   ``PeerKitError/notRunning``.
    public func send(_ message: RawPeerMessage, to peers: [Peer]) async throws {
        let session = try runningSession()
        let encoded = try Self.encode(message)
        if peers.count > 1 { try session.manager.requireConnected(peers) }
        try await send(encoded, to: peers, in: session)
    }

    /// Sends `message` to `peer` and waits for its reply, whatever its wire key.
    ///
    /// - Throws: as ``request(_:to:expecting:timeout:)``, except that any reply type is accepted;
    ///   ``PeerKitError/encodingFailed(type:reason:)`` when `message` is not valid.
    public func request(_ message: RawPeerMessage, to peer: Peer, timeout: Duration = .seconds(5)) async throws -> RawPeerMessage {
        let reply = try await exchange(Self.encode(message), id: nextRequestID(), with: peer, timeout: timeout)
        return RawPeerMessage(type: reply.type, json: String(buffer: reply.payload))
    }

    static func encode(_ message: RawPeerMessage) throws(PeerKitError) -> EncodedMessage {
        guard !message.type.isEmpty else {
            throw .encodingFailed(type: message.type, reason: "the wire key is empty")
        }
        guard !EnvelopeType.isReserved(message.type) else {
            throw .encodingFailed(type: message.type, reason: "wire keys starting with \"peerkit.\" are reserved for the protocol")
        }
        guard (try? JSONSerialization.jsonObject(with: Data(message.json.utf8), options: [.fragmentsAllowed])) != nil else {
            throw .encodingFailed(type: message.type, reason: "the payload \(message.json.debugDescription) is not JSON text")
        }
        return EncodedMessage(type: message.type, payload: ByteBuffer(string: message.json))
    }
}
