// Codes about a connection to a peer: its frames, its handshake, its liveness, its limits.
// To add a code, see "Adding a code" in PeerKitError.swift.

extension PeerKitError.Code {
    /// A peer sent a frame longer than the configured limit; its connection was closed.
    public static let frameTooLarge = Self("frameTooLarge")
    /// A peer sent bytes that are not a valid PeerKit frame or envelope; its connection was closed
    /// when this happened before or during the handshake.
    public static let malformedFrame = Self("malformedFrame")
    /// The handshake with a peer failed; the connection was closed.
    public static let handshakeFailed = Self("handshakeFailed")
    /// A peer stopped answering pings and was disconnected.
    public static let peerTimedOut = Self("peerTimedOut")
    /// The peer is not connected, so nothing was sent.
    public static let peerNotConnected = Self("peerNotConnected")
    /// A peer did not read what was sent to it: its send queue stayed over
    /// ``PeerConfiguration/maximumQueuedOutboundBytes`` for longer than
    /// ``PeerConfiguration/slowPeerGracePeriod``, so it was disconnected.
    public static let peerTooSlow = Self("peerTooSlow")
    /// The connection to a peer closed without a goodbye (or while a request to it waited for its reply).
    public static let connectionClosed = Self("connectionClosed")
    /// The connection to a peer failed at the transport level (a reset, a TLS alert).
    public static let connectionFailed = Self("connectionFailed")
    /// The peer does not take part in an optional protocol feature (its hello does not list it), so nothing that needs the feature was sent to it.
    public static let featureNotSupported = Self("featureNotSupported")
    /// A peer went over one of the limits on what it may make this transceiver keep (such as ``PeerConfiguration/maximumGroupsPerPeer``); it was disconnected.
    public static let peerExceededLimit = Self("peerExceededLimit")
}

extension PeerKitError {
    /// A peer sent a frame longer than the configured limit; its connection was closed.
    public static func frameTooLarge(length: Int, limit: Int, peer: String) -> PeerKitError {
        PeerKitError(.frameTooLarge, ["length": .number(length), "limit": .number(limit), "peer": .text(peer)],
                     "A frame of \(length) bytes exceeds the \(limit)-byte limit; the connection to \(peer) was closed.")
    }

    /// A peer sent bytes that are not a valid PeerKit frame or envelope; its connection was closed
    /// when this happened before or during the handshake.
    public static func malformedFrame(reason: String, peer: String) -> PeerKitError {
        PeerKitError(.malformedFrame, ["reason": .text(reason), "peer": .text(peer)],
                     "\(peer) sent a malformed frame: \(reason).")
    }

    /// The handshake with a peer failed; the connection was closed.
    public static func handshakeFailed(reason: String, peer: String) -> PeerKitError {
        PeerKitError(.handshakeFailed, ["reason": .text(reason), "peer": .text(peer)],
                     "The handshake with \(peer) failed: \(reason).",
                     // A TLS server's refusal as a plaintext client reads it (see SecurityModeSniffer), or a
                     // certificate-mode peer's refusal of our peer ID.
                     isSecurityRefusal: reason.contains(SecurityModeSniffer.tlsRequiredReason) || reason.contains(ConnectionStateMachine.unboundPeerIDReason))
    }

    /// A peer stopped answering pings and was disconnected.
    public static func peerTimedOut(peer: String, silence: Duration) -> PeerKitError {
        PeerKitError(.peerTimedOut, ["peer": .text(peer), "silence": .duration(silence)],
                     "\(peer) did not answer for \(silence.peerKitSeconds) and was disconnected.")
    }

    /// The peer is not connected, so nothing was sent.
    public static func peerNotConnected(peer: String) -> PeerKitError {
        PeerKitError(.peerNotConnected, ["peer": .text(peer)],
                     "\(peer) is not connected, so nothing was sent; wait for peerConnected before sending.")
    }

    /// A peer did not read what was sent to it: its send queue stayed over
    /// ``PeerConfiguration/maximumQueuedOutboundBytes`` for longer than
    /// ``PeerConfiguration/slowPeerGracePeriod``, so it was disconnected.
    public static func peerTooSlow(peer: String, queuedBytes: Int, limit: Int, grace: Duration) -> PeerKitError {
        // A grace of zero: a broadcast, which cannot wait, found the peer's outbox full.
        let how = grace == .zero
            ? "at the \(limit)-byte limit (PeerConfiguration.maximumQueuedOutboundBytes) when a broadcast, which cannot wait, came for it"
            : "over the \(limit)-byte limit (PeerConfiguration.maximumQueuedOutboundBytes), for more than \(grace.peerKitSeconds)"
        return PeerKitError(.peerTooSlow, ["peer": .text(peer), "queuedBytes": .number(queuedBytes), "limit": .number(limit), "grace": .duration(grace)],
                     "\(peer) did not read what was sent to it: \(queuedBytes) bytes waited to be sent, \(how), so it was disconnected. Send less to it, or raise the limit.")
    }

    /// A peer did not read what was sent to it while all peers' send queues together were at
    /// ``PeerConfiguration/maximumTotalQueuedOutboundBytes``: it held a megabyte or more of that
    /// budget (what was made for it alone, not broadcasts) for longer than
    /// ``PeerConfiguration/slowPeerGracePeriod``, so it was disconnected. `limit` is the budget.
    public static func peerTooSlow(peer: String, queuedBytes: Int, budget: Int, grace: Duration) -> PeerKitError {
        PeerKitError(.peerTooSlow, ["peer": .text(peer), "queuedBytes": .number(queuedBytes), "limit": .number(budget), "grace": .duration(grace)],
                     "\(peer) did not read what was sent to it: \(queuedBytes) bytes waited to be sent to it while all peers' send queues together were at the \(budget)-byte budget (PeerConfiguration.maximumTotalQueuedOutboundBytes), for more than \(grace.peerKitSeconds), so it was disconnected. Send less, or raise the budget.")
    }

    /// The connection to a peer closed without a goodbye (or while a request to it waited for its reply).
    public static func connectionClosed(peer: String) -> PeerKitError {
        PeerKitError(.connectionClosed, ["peer": .text(peer)],
                     "The connection to \(peer) closed unexpectedly.")
    }

    /// The connection to a peer failed at the transport level (a reset, a TLS alert).
    public static func connectionFailed(peer: String, reason: String) -> PeerKitError {
        PeerKitError(.connectionFailed, ["peer": .text(peer), "reason": .text(reason)],
                     "The connection to \(peer) failed: \(reason).")
    }

    /// The peer does not take part in an optional protocol feature (its hello does not list it), so nothing that needs the feature was sent to it.
    public static func featureNotSupported(feature: String, peer: String) -> PeerKitError {
        PeerKitError(.featureNotSupported, ["feature": .text(feature), "peer": .text(peer)],
                     "\(peer.capitalizedFirst) does not take part in the \"\(feature)\" protocol feature (its hello does not list it, as with an older PeerKit), so nothing was sent. Update that peer, or send it ordinary messages.")
    }

    /// A peer went over one of the limits on what it may make this transceiver keep (such as ``PeerConfiguration/maximumGroupsPerPeer``); it was disconnected.
    public static func peerExceededLimit(peer: String, reason: String) -> PeerKitError {
        PeerKitError(.peerExceededLimit, ["peer": .text(peer), "reason": .text(reason)],
                     "\(peer.capitalizedFirst) went over a limit and was disconnected: \(reason).")
    }

    /// The `length` the sentence names, for the codes that have one (`frameTooLarge`); nil for the others.
    public var length: Int? { number("length") }

    /// The `silence` the sentence names, for the codes that have one (`peerTimedOut`); nil for the others.
    public var silence: Duration? { duration("silence") }

    /// The `queuedBytes` the sentence names, for the codes that have one (`peerTooSlow`); nil for the others.
    public var queuedBytes: Int? { number("queuedBytes") }

    /// The `grace` the sentence names, for the codes that have one (`peerTooSlow`); nil for the others.
    public var grace: Duration? { duration("grace") }

    /// The `feature` the sentence names, for the codes that have one (`featureNotSupported`); nil for the others.
    public var feature: String? { text("feature") }
}
