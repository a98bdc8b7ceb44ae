// Codes about messages, requests and groups: handlers, payloads, replies.
// To add a code, see "Adding a code" in PeerKitError.swift.

extension PeerKitError.Code {
    /// A message of this type arrived, but nothing is registered to receive it.
    public static let noHandler = Self("noHandler")
    /// A payload did not decode as the type registered for its wire key.
    public static let payloadDecodingFailed = Self("payloadDecodingFailed")
    /// A value could not be encoded as JSON.
    public static let encodingFailed = Self("encodingFailed")
    /// A request got no reply in time.
    public static let requestTimedOut = Self("requestTimedOut")
    /// The remote peer answered a request with an error.
    public static let remoteError = Self("remoteError")
    /// The remote peer answered a request with a reply of another type than expected.
    public static let unexpectedReply = Self("unexpectedReply")
    /// A group name cannot be used, or this transceiver cannot join one more group.
    public static let invalidGroup = Self("invalidGroup")
}

extension PeerKitError {
    /// A message of this type arrived, but nothing is registered to receive it.
    public static func noHandler(type: String) -> PeerKitError {
        PeerKitError(.noHandler, ["type": .text(type)],
                     "No handler for type \(LogSafe.text(type, maximumBytes: 80)).")
    }

    /// A payload did not decode as the type registered for its wire key.
    public static func payloadDecodingFailed(type: String, reason: String) -> PeerKitError {
        PeerKitError(.payloadDecodingFailed, ["type": .text(type), "reason": .text(reason)],
                     "The payload of a \(type) message could not be decoded: \(reason).")
    }

    /// A value could not be encoded as JSON.
    public static func encodingFailed(type: String, reason: String) -> PeerKitError {
        PeerKitError(.encodingFailed, ["type": .text(type), "reason": .text(reason)],
                     "A \(type) value could not be encoded as JSON: \(reason).")
    }

    /// A request got no reply in time.
    public static func requestTimedOut(type: String, peer: String, timeout: Duration) -> PeerKitError {
        requestTimedOut(type: type, peer: peer, timeout: timeout, connectionDown: false)
    }

    /// A request got no reply in time; `connectionDown`: the peer had no connection when the time
    /// ran out (its session waited for it to come back), which the sentence says, since it is the
    /// likelier cause than a slow handler.
    static func requestTimedOut(type: String, peer: String, timeout: Duration, connectionDown: Bool) -> PeerKitError {
        PeerKitError(.requestTimedOut, ["type": .text(type), "peer": .text(peer), "timeout": .duration(timeout)],
                     connectionDown
                        ? "\(peer) did not answer the \(type) request within \(timeout.peerKitSeconds): its connection is down, and it has not reconnected since it was lost. Check that it is still running and reachable."
                        : "\(peer) did not answer the \(type) request within \(timeout.peerKitSeconds).")
    }

    /// The remote peer answered a request with an error.
    public static func remoteError(reason: String, peer: String) -> PeerKitError {
        PeerKitError(.remoteError, ["reason": .text(reason), "peer": .text(peer)],
                     "\(peer) answered with an error: \(reason)",
                     // The peer's admission hook refused us (see AdmissionGate), or it refused our peer ID.
                     isSecurityRefusal: reason.contains(AdmissionGate.refusedReason) || reason.contains(ConnectionStateMachine.unboundPeerIDReason))
    }

    /// The remote peer answered a request with a reply of another type than expected.
    public static func unexpectedReply(expected: String, received: String, peer: String) -> PeerKitError {
        PeerKitError(.unexpectedReply, ["expected": .text(expected), "received": .text(received), "peer": .text(peer)],
                     "\(peer) answered with a \(received) message where a \(expected) was expected.")
    }

    /// A group name cannot be used, or this transceiver cannot join one more group.
    public static func invalidGroup(_ group: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidGroup, ["group": .text(group), "reason": .text(reason)],
                     "The group \"\(LogSafe.text(group, maximumBytes: 80))\" cannot be used: \(reason).")
    }

    /// The `expected` the sentence names, for the codes that have one (`unexpectedReply`); nil for the others.
    public var expected: String? { text("expected") }

    /// The `received` the sentence names, for the codes that have one (`unexpectedReply`); nil for the others.
    public var received: String? { text("received") }

    /// The `group` the sentence names, for the codes that have one (`invalidGroup`); nil for the others.
    public var group: String? { text("group") }
}
