/// The one error type PeerKit throws and reports.
///
/// Every case's ``description`` is a full sentence that names the values involved and, where
/// there is something to do about it, says what.
public enum PeerKitError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service type is not a valid DNS-SD service name (RFC 6335).
    case invalidServiceType(String, reason: String)
    /// A `discoveryInfo` pair cannot be carried in a DNS-SD TXT record.
    case invalidDiscoveryInfo(key: String, reason: String)
    /// The peer name cannot be advertised (empty, or longer than a DNS-SD instance name).
    case invalidPeerName(String, reason: String)
    /// A ``PeerConfiguration`` property has a value the transceiver cannot work with.
    case invalidConfiguration(property: String, reason: String)
    /// The transceiver could not listen for connections.
    case listenFailed(address: String, reason: String)
    /// Discovery cannot work right now (for example, avahi-daemon is not reachable).
    case discoveryUnavailable(serviceType: String, reason: String)
    /// A peer sent a frame longer than the configured limit; its connection was closed.
    case frameTooLarge(length: Int, limit: Int, peer: String)
    /// A peer sent bytes that are not a valid PeerKit frame or envelope; its connection was closed
    /// when this happened before or during the handshake.
    case malformedFrame(reason: String, peer: String)
    /// The handshake with a peer failed; the connection was closed.
    case handshakeFailed(reason: String, peer: String)
    /// A peer stopped answering pings and was disconnected.
    case peerTimedOut(peer: String, silence: Duration)
    /// A message of this type arrived, but nothing is registered to receive it.
    case noHandler(type: String)
    /// A payload did not decode as the type registered for its wire key.
    case payloadDecodingFailed(type: String, reason: String)
    /// A value could not be encoded as JSON.
    case encodingFailed(type: String, reason: String)
    /// The peer is not connected, so nothing was sent.
    case peerNotConnected(peer: String)
    /// A peer did not read what was sent to it: its send queue stayed over
    /// ``PeerConfiguration/maximumQueuedOutboundBytes`` for longer than
    /// ``PeerConfiguration/slowPeerGracePeriod``, so it was disconnected.
    case peerTooSlow(peer: String, queuedBytes: Int, limit: Int, grace: Duration)
    /// A request got no reply in time.
    case requestTimedOut(type: String, peer: String, timeout: Duration)
    /// The connection to a peer closed without a goodbye (or while a request to it waited for its reply).
    case connectionClosed(peer: String)
    /// The connection to a peer failed at the transport level (a reset, a TLS alert).
    case connectionFailed(peer: String, reason: String)
    /// The remote peer answered a request with an error.
    case remoteError(reason: String, peer: String)
    /// The remote peer answered a request with a reply of another type than expected.
    case unexpectedReply(expected: String, received: String, peer: String)
    /// No peer of the service type was connected within the timeout.
    case noPeerFound(serviceType: String, timeout: Duration)
    /// The transceiver is not running.
    case notRunning
    /// A ``PeerKey`` could not be made (wrong length, unreadable key file, empty passphrase).
    case invalidKey(reason: String)
    /// The TLS contexts for ``PeerConfiguration/security`` could not be built.
    case securitySetupFailed(reason: String)
    /// A peer that holds another pre-shared key tried to connect, or was dialled; closed during the
    /// TLS handshake, before anything was read from it.
    case keyMismatch(peer: String, ourKeyID: String, detail: String)
    /// A peer spoke plaintext to this TLS transceiver (or answered its dial in plaintext); closed
    /// before anything it sent was read.
    case plaintextPeer(peer: String, security: String)
    /// A peer spoke TLS to this plaintext transceiver; closed before anything it sent was read.
    case tlsPeer(peer: String)
    /// The peer uses TLS, but another security mode (or TLS version, or cipher suite) than this one.
    case securityModeMismatch(peer: String, ours: String, detail: String)
    /// The TLS handshake with a peer failed for another reason.
    case securityHandshakeFailed(peer: String, reason: String)
    /// Discovery found a peer that advertises another security mode or key id; it is not dialled.
    case advertisedSecurityMismatch(service: String, theirs: String, ours: String)
    /// The admission hook (``PeerConfiguration/admission``) refused a peer; its connection was closed.
    case admissionRefused(peer: String)
    /// The peer does not take part in an optional protocol feature (its hello does not list it),
    /// so nothing that needs the feature was sent to it.
    case featureNotSupported(feature: String, peer: String)
    /// The receiver of a resource refused it (no handler for its name, one of its limits) or
    /// cancelled it while receiving it.
    case resourceRefused(name: String, peer: String, reason: String)
    /// A resource transfer was cancelled: by this side (``OutgoingResource/cancel()``,
    /// ``IncomingResource/cancel()``) or by the sender.
    case resourceCancelled(name: String, peer: String, reason: String)
    /// A received resource's SHA-256 digest differs from the one its sender computed; the bytes
    /// were discarded.
    case resourceDigestMismatch(name: String, peer: String)
    /// The source of an outgoing resource failed (a file that cannot be read, a sequence that
    /// threw, or fewer or more bytes than its declared size).
    case resourceSourceFailed(name: String, reason: String)

    /// The error as a sentence naming the values involved: what happened and what to do.
    public var description: String {
        switch self {
        case let .invalidServiceType(type, reason):
            return "The service type \"\(type)\" is not a valid DNS-SD service name: \(reason). Use 1 to 15 lowercase letters, digits and hyphens, with at least one letter, for example \"listrctl\"."
        case let .invalidDiscoveryInfo(key, reason):
            return "The discovery info entry \"\(key)\" cannot be advertised: \(reason)."
        case let .invalidPeerName(name, reason):
            return "The peer name \"\(LogSafe.text(name, maximumBytes: 80))\" cannot be used: \(reason). Set PeerConfiguration.peerName to 1 to \(PeerConfiguration.maximumPeerNameLength) bytes of UTF-8."
        case let .invalidConfiguration(property, reason):
            return "PeerConfiguration.\(property) cannot be used: \(reason)."
        case let .listenFailed(address, reason):
            return "PeerKit could not listen on \(address): \(reason). Choose another port or address in PeerConfiguration."
        case let .discoveryUnavailable(serviceType, reason):
            return "Peers of service type \"\(serviceType)\" cannot be discovered: \(reason). Start avahi-daemon (and the D-Bus system bus it needs), or configure static peers with PeerConfiguration.discovery = .staticPeers([...])."
        case let .frameTooLarge(length, limit, peer):
            return "A frame of \(length) bytes exceeds the \(limit)-byte limit; the connection to \(peer) was closed."
        case let .malformedFrame(reason, peer):
            return "\(peer) sent a malformed frame: \(reason)."
        case let .handshakeFailed(reason, peer):
            return "The handshake with \(peer) failed: \(reason)."
        case let .peerTimedOut(peer, silence):
            return "\(peer) did not answer for \(silence.peerKitSeconds) and was disconnected."
        case let .noHandler(type):
            return "No handler for type \(LogSafe.text(type, maximumBytes: 80))."
        case let .payloadDecodingFailed(type, reason):
            return "The payload of a \(type) message could not be decoded: \(reason)."
        case let .encodingFailed(type, reason):
            return "A \(type) value could not be encoded as JSON: \(reason)."
        case let .peerNotConnected(peer):
            return "\(peer) is not connected, so nothing was sent; wait for peerConnected before sending."
        case let .peerTooSlow(peer, queuedBytes, limit, grace):
            return "\(peer) did not read what was sent to it: \(queuedBytes) bytes waited to be sent, over the \(limit)-byte limit (PeerConfiguration.maximumQueuedOutboundBytes), for more than \(grace.peerKitSeconds), so it was disconnected. Send less to it, or raise the limit."
        case let .requestTimedOut(type, peer, timeout):
            return "\(peer) did not answer the \(type) request within \(timeout.peerKitSeconds)."
        case let .connectionClosed(peer):
            return "The connection to \(peer) closed unexpectedly."
        case let .connectionFailed(peer, reason):
            return "The connection to \(peer) failed: \(reason)."
        case let .remoteError(reason, peer):
            return "\(peer) answered with an error: \(reason)"
        case let .unexpectedReply(expected, received, peer):
            return "\(peer) answered with a \(received) message where a \(expected) was expected."
        case let .noPeerFound(serviceType, timeout):
            return "No peer of service type \"\(serviceType)\" connected within \(timeout.peerKitSeconds). Check that a peer is running and advertising that service type, and that avahi-daemon is running."
        case .notRunning:
            return "The transceiver is not running; call resume() before sending."
        case let .invalidKey(reason):
            return "The pre-shared key cannot be used: \(reason). Make a key with PeerKey.random() (32 random bytes) and give every peer the same one."
        case let .securitySetupFailed(reason):
            return "Security cannot be set up: \(reason)."
        case let .keyMismatch(peer, ourKeyID, detail):
            return "\(peer.capitalizedFirst) does not share our pre-shared key: \(detail). Our key id is \(ourKeyID); give both sides the same key. The connection was closed before anything was read from it."
        case let .plaintextPeer(peer, security):
            return "\(peer.capitalizedFirst) speaks plaintext, and this transceiver requires TLS (security \(security)). Configure the same PeerConfiguration.security on both sides. The connection was closed before anything was read from it."
        case let .tlsPeer(peer):
            return "\(peer.capitalizedFirst) speaks TLS, and this transceiver has security .none (plaintext). Configure the same PeerConfiguration.security (and key) on both sides. The connection was closed before anything was read from it."
        case let .securityModeMismatch(peer, ours, detail):
            return "\(peer.capitalizedFirst) uses another security mode than ours (\(ours)): \(detail). Configure the same PeerConfiguration.security on both sides."
        case let .securityHandshakeFailed(peer, reason):
            return "The TLS handshake with \(peer) failed: \(reason)."
        case let .advertisedSecurityMismatch(service, theirs, ours):
            return "The service \"\(service)\" advertises security \(theirs), and ours is \(ours), so it is not dialled. Give both sides the same PeerConfiguration.security and key."
        case let .admissionRefused(peer):
            return "The admission hook refused \(peer); its connection was closed."
        case let .featureNotSupported(feature, peer):
            return "\(peer.capitalizedFirst) does not take part in the \"\(feature)\" protocol feature (its hello does not list it, as with an older PeerKit), so nothing was sent. Update that peer, or send it ordinary messages."
        case let .resourceRefused(name, peer, reason):
            return "\(peer.capitalizedFirst) refused the resource \"\(name)\": \(reason)."
        case let .resourceCancelled(name, peer, reason):
            return "The transfer of the resource \"\(name)\" with \(peer) was cancelled: \(reason)."
        case let .resourceDigestMismatch(name, peer):
            return "The resource \"\(name)\" from \(peer) arrived corrupted: its SHA-256 digest differs from the one the sender computed, so its bytes were discarded and no file was written under its name. Send it again."
        case let .resourceSourceFailed(name, reason):
            return "The resource \"\(name)\" could not be read: \(reason); its transfer was cancelled."
        }
    }
}

extension PeerKitError {
    /// Whether the error refused a peer for security reasons (key, mode, TLS). Such a peer is not
    /// redialled until it is discovered again, and a refusal is logged once per host and episode.
    public var isSecurityRefusal: Bool {
        switch self {
        case .keyMismatch, .plaintextPeer, .tlsPeer, .securityModeMismatch, .securityHandshakeFailed,
             .advertisedSecurityMismatch, .admissionRefused:
            return true
        case let .handshakeFailed(reason, _):
            // A TLS server's refusal as a plaintext client reads it (see SecurityModeSniffer).
            return reason.contains(SecurityModeSniffer.tlsRequiredReason)
        case let .remoteError(reason, _):
            // The peer's admission hook refused us (see AdmissionGate).
            return reason.contains(AdmissionGate.refusedReason)
        default:
            return false
        }
    }
}

extension String {
    /// The string with its first letter in upper case, to start a sentence with "the … peer at …".
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}

extension Duration {
    /// "2.5 s", for error messages.
    var peerKitSeconds: String {
        let (seconds, attoseconds) = self.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        let rounded = (value * 1000).rounded() / 1000
        return rounded == rounded.rounded() ? "\(Int(rounded)) s" : "\(rounded) s"
    }
}
