/// The one error type PeerKit throws and reports.
///
/// Every error's ``description`` is a full sentence that names the values involved and, where
/// there is something to do about it, says what. ``code`` says which error it is; new codes may
/// be added in any release, so compare codes rather than switching over them exhaustively:
///
/// ```swift
/// do {
///     let reply = try await transceiver.request(command, to: peer, expecting: Reply.self)
/// } catch let error as PeerKitError where error.code == .requestTimedOut {
///     print("No answer within \(error.timeout ?? .zero): \(error)")
/// }
/// ```
///
/// Errors are made with static functions named after their codes
/// (`PeerKitError.peerNotConnected(peer: "Kitchen")`), and two errors are equal when their codes
/// and values are, so `#expect(throws: PeerKitError.notRunning)` works as it did when this was an enum.
public struct PeerKitError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which error a ``PeerKitError`` is. More codes may be added in any release.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// The code's name, as in `PeerKitError.Code.requestTimedOut`.
        public var description: String { name }

        /// The service type is not a valid DNS-SD service name (RFC 6335).
        public static let invalidServiceType = Code("invalidServiceType")
        /// A `discoveryInfo` pair cannot be carried in a DNS-SD TXT record.
        public static let invalidDiscoveryInfo = Code("invalidDiscoveryInfo")
        /// The peer name cannot be advertised (empty, or longer than a DNS-SD instance name).
        public static let invalidPeerName = Code("invalidPeerName")
        /// A ``PeerConfiguration`` property has a value the transceiver cannot work with.
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// The transceiver could not listen for connections.
        public static let listenFailed = Code("listenFailed")
        /// Discovery cannot work right now (for example, avahi-daemon is not reachable).
        public static let discoveryUnavailable = Code("discoveryUnavailable")
        /// A peer sent a frame longer than the configured limit; its connection was closed.
        public static let frameTooLarge = Code("frameTooLarge")
        /// A peer sent bytes that are not a valid PeerKit frame or envelope; its connection was closed
        /// when this happened before or during the handshake.
        public static let malformedFrame = Code("malformedFrame")
        /// The handshake with a peer failed; the connection was closed.
        public static let handshakeFailed = Code("handshakeFailed")
        /// A peer stopped answering pings and was disconnected.
        public static let peerTimedOut = Code("peerTimedOut")
        /// A message of this type arrived, but nothing is registered to receive it.
        public static let noHandler = Code("noHandler")
        /// A payload did not decode as the type registered for its wire key.
        public static let payloadDecodingFailed = Code("payloadDecodingFailed")
        /// A value could not be encoded as JSON.
        public static let encodingFailed = Code("encodingFailed")
        /// The peer is not connected, so nothing was sent.
        public static let peerNotConnected = Code("peerNotConnected")
        /// A peer did not read what was sent to it: its send queue stayed over
        /// ``PeerConfiguration/maximumQueuedOutboundBytes`` for longer than
        /// ``PeerConfiguration/slowPeerGracePeriod``, so it was disconnected.
        public static let peerTooSlow = Code("peerTooSlow")
        /// A request got no reply in time.
        public static let requestTimedOut = Code("requestTimedOut")
        /// The connection to a peer closed without a goodbye (or while a request to it waited for its reply).
        public static let connectionClosed = Code("connectionClosed")
        /// The connection to a peer failed at the transport level (a reset, a TLS alert).
        public static let connectionFailed = Code("connectionFailed")
        /// The remote peer answered a request with an error.
        public static let remoteError = Code("remoteError")
        /// The remote peer answered a request with a reply of another type than expected.
        public static let unexpectedReply = Code("unexpectedReply")
        /// No peer of the service type was connected within the timeout.
        public static let noPeerFound = Code("noPeerFound")
        /// The transceiver is not running.
        public static let notRunning = Code("notRunning")
        /// A ``PeerKey`` could not be made (wrong length, unreadable key file, empty passphrase).
        public static let invalidKey = Code("invalidKey")
        /// The TLS contexts for ``PeerConfiguration/security`` could not be built.
        public static let securitySetupFailed = Code("securitySetupFailed")
        /// A peer that holds another pre-shared key tried to connect, or was dialled; closed during the
        /// TLS handshake, before anything was read from it.
        public static let keyMismatch = Code("keyMismatch")
        /// A peer spoke plaintext to this TLS transceiver (or answered its dial in plaintext); closed
        /// before anything it sent was read.
        public static let plaintextPeer = Code("plaintextPeer")
        /// A peer spoke TLS to this plaintext transceiver; closed before anything it sent was read.
        public static let tlsPeer = Code("tlsPeer")
        /// The peer uses TLS, but another security mode (or TLS version, or cipher suite) than this one.
        public static let securityModeMismatch = Code("securityModeMismatch")
        /// The TLS handshake with a peer failed for another reason.
        public static let securityHandshakeFailed = Code("securityHandshakeFailed")
        /// Discovery found a peer that advertises another security mode or key id; it is not dialled.
        public static let advertisedSecurityMismatch = Code("advertisedSecurityMismatch")
        /// The admission hook (``PeerConfiguration/admission``) refused a peer; its connection was closed.
        public static let admissionRefused = Code("admissionRefused")
        /// The source of an outgoing resource failed (a file that cannot be read, a sequence that threw, or fewer or more bytes than its declared size).
        public static let resourceSourceFailed = Code("resourceSourceFailed")
        /// A received resource's SHA-256 digest differs from the one its sender computed; the bytes were discarded.
        public static let resourceDigestMismatch = Code("resourceDigestMismatch")
        /// A resource transfer was cancelled: by this side (``OutgoingResource/cancel()``, ``IncomingResource/cancel()``) or by the sender.
        public static let resourceCancelled = Code("resourceCancelled")
        /// The receiver of a resource refused it (no handler for its name, one of its limits) or cancelled it while receiving it.
        public static let resourceRefused = Code("resourceRefused")
        /// The peer does not take part in an optional protocol feature (its hello does not list it), so nothing that needs the feature was sent to it.
        public static let featureNotSupported = Code("featureNotSupported")
        /// In certificates mode, a peer's hello claimed a peer ID that is not its certificate's public-key fingerprint; closed before any message of it was dispatched.
        public static let peerIDNotBound = Code("peerIDNotBound")
        /// In certificates mode, the peer refused our certificate (it does not trust our key); closed during the TLS handshake.
        public static let certificateRefused = Code("certificateRefused")
        /// In certificates mode, a peer presented a certificate whose public key is neither pinned nor signed by a trusted CA; closed during the TLS handshake, before anything was read from it.
        public static let certificateNotTrusted = Code("certificateNotTrusted")
        /// A ``PeerIdentity`` or ``PeerTrust`` could not be made (unreadable or malformed PEM, a key that is not the certificate's, a key file others can read, a malformed fingerprint).
        public static let invalidIdentity = Code("invalidIdentity")
        /// A group name cannot be used, or this transceiver cannot join one more group.
        public static let invalidGroup = Code("invalidGroup")
        /// A peer went over one of the limits on what it may make this transceiver keep (such as ``PeerConfiguration/maximumGroupsPerPeer``); it was disconnected.
        public static let peerExceededLimit = Code("peerExceededLimit")
        /// ``PeerTransceiver/run()`` was called while the transceiver runs already.
        public static let alreadyRunning = Code("alreadyRunning")
    }

    /// What happened, with the values the sentence names.
    enum Storage: Hashable, Sendable {
        case invalidServiceType(String, reason: String)
        case invalidDiscoveryInfo(key: String, reason: String)
        case invalidPeerName(String, reason: String)
        case invalidConfiguration(property: String, reason: String)
        case listenFailed(address: String, reason: String)
        case discoveryUnavailable(serviceType: String, reason: String)
        case frameTooLarge(length: Int, limit: Int, peer: String)
        case malformedFrame(reason: String, peer: String)
        case handshakeFailed(reason: String, peer: String)
        case peerTimedOut(peer: String, silence: Duration)
        case noHandler(type: String)
        case payloadDecodingFailed(type: String, reason: String)
        case encodingFailed(type: String, reason: String)
        case peerNotConnected(peer: String)
        case peerTooSlow(peer: String, queuedBytes: Int, limit: Int, grace: Duration)
        case requestTimedOut(type: String, peer: String, timeout: Duration)
        case connectionClosed(peer: String)
        case connectionFailed(peer: String, reason: String)
        case remoteError(reason: String, peer: String)
        case unexpectedReply(expected: String, received: String, peer: String)
        case noPeerFound(serviceType: String, timeout: Duration)
        case notRunning
        case invalidKey(reason: String)
        case securitySetupFailed(reason: String)
        case keyMismatch(peer: String, ourKeyID: String, detail: String)
        case plaintextPeer(peer: String, security: String)
        case tlsPeer(peer: String)
        case securityModeMismatch(peer: String, ours: String, detail: String)
        case securityHandshakeFailed(peer: String, reason: String)
        case advertisedSecurityMismatch(service: String, theirs: String, ours: String)
        case admissionRefused(peer: String)
        case alreadyRunning
        case peerExceededLimit(peer: String, reason: String)
        case invalidGroup(String, reason: String)
        case invalidIdentity(reason: String)
        case certificateNotTrusted(peer: String, fingerprint: String?, reason: String)
        case certificateRefused(peer: String, ourFingerprint: String, detail: String)
        case peerIDNotBound(peer: String, claimed: String, fingerprint: String)
        case featureNotSupported(feature: String, peer: String)
        case resourceRefused(name: String, peer: String, reason: String)
        case resourceCancelled(name: String, peer: String, reason: String)
        case resourceDigestMismatch(name: String, peer: String)
        case resourceSourceFailed(name: String, reason: String)
    }

    /// The error's kind and values.
    let storage: Storage

    init(_ storage: Storage) {
        self.storage = storage
    }

    /// Which error this is.
    public var code: Code {
        switch storage {
        case .invalidServiceType: .invalidServiceType
        case .invalidDiscoveryInfo: .invalidDiscoveryInfo
        case .invalidPeerName: .invalidPeerName
        case .invalidConfiguration: .invalidConfiguration
        case .listenFailed: .listenFailed
        case .discoveryUnavailable: .discoveryUnavailable
        case .frameTooLarge: .frameTooLarge
        case .malformedFrame: .malformedFrame
        case .handshakeFailed: .handshakeFailed
        case .peerTimedOut: .peerTimedOut
        case .noHandler: .noHandler
        case .payloadDecodingFailed: .payloadDecodingFailed
        case .encodingFailed: .encodingFailed
        case .peerNotConnected: .peerNotConnected
        case .peerTooSlow: .peerTooSlow
        case .requestTimedOut: .requestTimedOut
        case .connectionClosed: .connectionClosed
        case .connectionFailed: .connectionFailed
        case .remoteError: .remoteError
        case .unexpectedReply: .unexpectedReply
        case .noPeerFound: .noPeerFound
        case .notRunning: .notRunning
        case .invalidKey: .invalidKey
        case .securitySetupFailed: .securitySetupFailed
        case .keyMismatch: .keyMismatch
        case .plaintextPeer: .plaintextPeer
        case .tlsPeer: .tlsPeer
        case .securityModeMismatch: .securityModeMismatch
        case .securityHandshakeFailed: .securityHandshakeFailed
        case .advertisedSecurityMismatch: .advertisedSecurityMismatch
        case .admissionRefused: .admissionRefused
        case .resourceSourceFailed: .resourceSourceFailed
        case .resourceDigestMismatch: .resourceDigestMismatch
        case .resourceCancelled: .resourceCancelled
        case .resourceRefused: .resourceRefused
        case .featureNotSupported: .featureNotSupported
        case .peerIDNotBound: .peerIDNotBound
        case .certificateRefused: .certificateRefused
        case .certificateNotTrusted: .certificateNotTrusted
        case .invalidIdentity: .invalidIdentity
        case .invalidGroup: .invalidGroup
        case .peerExceededLimit: .peerExceededLimit
        case .alreadyRunning: .alreadyRunning
        }
    }

    /// The error as a sentence naming the values involved: what happened and what to do.
    public var description: String {
        storage.description
    }

    // MARK: The values the sentence names

    /// The `serviceType` the sentence names, for the codes that have one (`invalidServiceType`, `discoveryUnavailable`, `noPeerFound`); nil for the others.
    public var serviceType: String? {
        switch storage {
        case let .invalidServiceType(value, _): value
        case let .discoveryUnavailable(value, _): value
        case let .noPeerFound(value, _): value
        default: nil
        }
    }

    /// The `reason` the sentence names, for the codes that have one (`invalidServiceType`, `invalidDiscoveryInfo`, `invalidPeerName`, `invalidConfiguration`, `listenFailed`, `discoveryUnavailable`, `malformedFrame`, `handshakeFailed`, `payloadDecodingFailed`, `encodingFailed`, `connectionFailed`, `remoteError`, `invalidKey`, `securitySetupFailed`, `securityHandshakeFailed`, `peerExceededLimit`, `invalidGroup`, `invalidIdentity`, `certificateNotTrusted`, `resourceRefused`, `resourceCancelled`, `resourceSourceFailed`); nil for the others.
    public var reason: String? {
        switch storage {
        case let .invalidServiceType(_, value): value
        case let .invalidDiscoveryInfo(_, value): value
        case let .invalidPeerName(_, value): value
        case let .invalidConfiguration(_, value): value
        case let .listenFailed(_, value): value
        case let .discoveryUnavailable(_, value): value
        case let .malformedFrame(value, _): value
        case let .handshakeFailed(value, _): value
        case let .payloadDecodingFailed(_, value): value
        case let .encodingFailed(_, value): value
        case let .connectionFailed(_, value): value
        case let .remoteError(value, _): value
        case let .invalidKey(value): value
        case let .securitySetupFailed(value): value
        case let .securityHandshakeFailed(_, value): value
        case let .peerExceededLimit(_, value): value
        case let .invalidGroup(_, value): value
        case let .invalidIdentity(value): value
        case let .certificateNotTrusted(_, _, value): value
        case let .resourceRefused(_, _, value): value
        case let .resourceCancelled(_, _, value): value
        case let .resourceSourceFailed(_, value): value
        default: nil
        }
    }

    /// The `key` the sentence names, for the codes that have one (`invalidDiscoveryInfo`); nil for the others.
    public var key: String? {
        switch storage {
        case let .invalidDiscoveryInfo(value, _): value
        default: nil
        }
    }

    /// The `name` the sentence names, for the codes that have one (`invalidPeerName`, `resourceRefused`, `resourceCancelled`, `resourceDigestMismatch`, `resourceSourceFailed`); nil for the others.
    public var name: String? {
        switch storage {
        case let .invalidPeerName(value, _): value
        case let .resourceRefused(value, _, _): value
        case let .resourceCancelled(value, _, _): value
        case let .resourceDigestMismatch(value, _): value
        case let .resourceSourceFailed(value, _): value
        default: nil
        }
    }

    /// The `property` the sentence names, for the codes that have one (`invalidConfiguration`); nil for the others.
    public var property: String? {
        switch storage {
        case let .invalidConfiguration(value, _): value
        default: nil
        }
    }

    /// The `address` the sentence names, for the codes that have one (`listenFailed`); nil for the others.
    public var address: String? {
        switch storage {
        case let .listenFailed(value, _): value
        default: nil
        }
    }

    /// The `length` the sentence names, for the codes that have one (`frameTooLarge`); nil for the others.
    public var length: Int? {
        switch storage {
        case let .frameTooLarge(value, _, _): value
        default: nil
        }
    }

    /// The `limit` the sentence names, for the codes that have one (`frameTooLarge`, `peerTooSlow`); nil for the others.
    public var limit: Int? {
        switch storage {
        case let .frameTooLarge(_, value, _): value
        case let .peerTooSlow(_, _, value, _): value
        default: nil
        }
    }

    /// The `peer` the sentence names, for the codes that have one (`frameTooLarge`, `malformedFrame`, `handshakeFailed`, `peerTimedOut`, `peerNotConnected`, `peerTooSlow`, `requestTimedOut`, `connectionClosed`, `connectionFailed`, `remoteError`, `unexpectedReply`, `keyMismatch`, `plaintextPeer`, `tlsPeer`, `securityModeMismatch`, `securityHandshakeFailed`, `admissionRefused`, `peerExceededLimit`, `certificateNotTrusted`, `certificateRefused`, `peerIDNotBound`, `featureNotSupported`, `resourceRefused`, `resourceCancelled`, `resourceDigestMismatch`); nil for the others.
    public var peer: String? {
        switch storage {
        case let .frameTooLarge(_, _, value): value
        case let .malformedFrame(_, value): value
        case let .handshakeFailed(_, value): value
        case let .peerTimedOut(value, _): value
        case let .peerNotConnected(value): value
        case let .peerTooSlow(value, _, _, _): value
        case let .requestTimedOut(_, value, _): value
        case let .connectionClosed(value): value
        case let .connectionFailed(value, _): value
        case let .remoteError(_, value): value
        case let .unexpectedReply(_, _, value): value
        case let .keyMismatch(value, _, _): value
        case let .plaintextPeer(value, _): value
        case let .tlsPeer(value): value
        case let .securityModeMismatch(value, _, _): value
        case let .securityHandshakeFailed(value, _): value
        case let .admissionRefused(value): value
        case let .peerExceededLimit(value, _): value
        case let .certificateNotTrusted(value, _, _): value
        case let .certificateRefused(value, _, _): value
        case let .peerIDNotBound(value, _, _): value
        case let .featureNotSupported(_, value): value
        case let .resourceRefused(_, value, _): value
        case let .resourceCancelled(_, value, _): value
        case let .resourceDigestMismatch(_, value): value
        default: nil
        }
    }

    /// The `feature` the sentence names, for the codes that have one (`featureNotSupported`); nil for the others.
    public var feature: String? {
        switch storage {
        case let .featureNotSupported(value, _): value
        default: nil
        }
    }

    /// The `claimed` the sentence names, for the codes that have one (`peerIDNotBound`); nil for the others.
    public var claimed: String? {
        switch storage {
        case let .peerIDNotBound(_, value, _): value
        default: nil
        }
    }

    /// The `ourFingerprint` the sentence names, for the codes that have one (`certificateRefused`); nil for the others.
    public var ourFingerprint: String? {
        switch storage {
        case let .certificateRefused(_, value, _): value
        default: nil
        }
    }

    /// The `fingerprint` the sentence names, for the codes that have one (`certificateNotTrusted`, `peerIDNotBound`); nil for the others.
    public var fingerprint: String? {
        switch storage {
        case let .certificateNotTrusted(_, value, _): value
        case let .peerIDNotBound(_, _, value): value
        default: nil
        }
    }

    /// The `group` the sentence names, for the codes that have one (`invalidGroup`); nil for the others.
    public var group: String? {
        switch storage {
        case let .invalidGroup(value, _): value
        default: nil
        }
    }

    /// The `silence` the sentence names, for the codes that have one (`peerTimedOut`); nil for the others.
    public var silence: Duration? {
        switch storage {
        case let .peerTimedOut(_, value): value
        default: nil
        }
    }

    /// The `type` the sentence names, for the codes that have one (`noHandler`, `payloadDecodingFailed`, `encodingFailed`, `requestTimedOut`); nil for the others.
    public var type: String? {
        switch storage {
        case let .noHandler(value): value
        case let .payloadDecodingFailed(value, _): value
        case let .encodingFailed(value, _): value
        case let .requestTimedOut(value, _, _): value
        default: nil
        }
    }

    /// The `queuedBytes` the sentence names, for the codes that have one (`peerTooSlow`); nil for the others.
    public var queuedBytes: Int? {
        switch storage {
        case let .peerTooSlow(_, value, _, _): value
        default: nil
        }
    }

    /// The `grace` the sentence names, for the codes that have one (`peerTooSlow`); nil for the others.
    public var grace: Duration? {
        switch storage {
        case let .peerTooSlow(_, _, _, value): value
        default: nil
        }
    }

    /// The `timeout` the sentence names, for the codes that have one (`requestTimedOut`, `noPeerFound`); nil for the others.
    public var timeout: Duration? {
        switch storage {
        case let .requestTimedOut(_, _, value): value
        case let .noPeerFound(_, value): value
        default: nil
        }
    }

    /// The `expected` the sentence names, for the codes that have one (`unexpectedReply`); nil for the others.
    public var expected: String? {
        switch storage {
        case let .unexpectedReply(value, _, _): value
        default: nil
        }
    }

    /// The `received` the sentence names, for the codes that have one (`unexpectedReply`); nil for the others.
    public var received: String? {
        switch storage {
        case let .unexpectedReply(_, value, _): value
        default: nil
        }
    }

    /// The `ourKeyID` the sentence names, for the codes that have one (`keyMismatch`); nil for the others.
    public var ourKeyID: String? {
        switch storage {
        case let .keyMismatch(_, value, _): value
        default: nil
        }
    }

    /// The `detail` the sentence names, for the codes that have one (`keyMismatch`, `securityModeMismatch`, `certificateRefused`); nil for the others.
    public var detail: String? {
        switch storage {
        case let .keyMismatch(_, _, value): value
        case let .securityModeMismatch(_, _, value): value
        case let .certificateRefused(_, _, value): value
        default: nil
        }
    }

    /// The `security` the sentence names, for the codes that have one (`plaintextPeer`); nil for the others.
    public var security: String? {
        switch storage {
        case let .plaintextPeer(_, value): value
        default: nil
        }
    }

    /// The `ours` the sentence names, for the codes that have one (`securityModeMismatch`, `advertisedSecurityMismatch`); nil for the others.
    public var ours: String? {
        switch storage {
        case let .securityModeMismatch(_, value, _): value
        case let .advertisedSecurityMismatch(_, _, value): value
        default: nil
        }
    }

    /// The `service` the sentence names, for the codes that have one (`advertisedSecurityMismatch`); nil for the others.
    public var service: String? {
        switch storage {
        case let .advertisedSecurityMismatch(value, _, _): value
        default: nil
        }
    }

    /// The `theirs` the sentence names, for the codes that have one (`advertisedSecurityMismatch`); nil for the others.
    public var theirs: String? {
        switch storage {
        case let .advertisedSecurityMismatch(_, value, _): value
        default: nil
        }
    }

    // MARK: Making errors (one function per code, as the enum's cases were)

    /// The service type is not a valid DNS-SD service name (RFC 6335).
    public static func invalidServiceType(_ serviceType: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidServiceType(serviceType, reason: reason))
    }

    /// A `discoveryInfo` pair cannot be carried in a DNS-SD TXT record.
    public static func invalidDiscoveryInfo(key: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidDiscoveryInfo(key: key, reason: reason))
    }

    /// The peer name cannot be advertised (empty, or longer than a DNS-SD instance name).
    public static func invalidPeerName(_ name: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidPeerName(name, reason: reason))
    }

    /// A ``PeerConfiguration`` property has a value the transceiver cannot work with.
    public static func invalidConfiguration(property: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidConfiguration(property: property, reason: reason))
    }

    /// The transceiver could not listen for connections.
    public static func listenFailed(address: String, reason: String) -> PeerKitError {
        PeerKitError(.listenFailed(address: address, reason: reason))
    }

    /// Discovery cannot work right now (for example, avahi-daemon is not reachable).
    public static func discoveryUnavailable(serviceType: String, reason: String) -> PeerKitError {
        PeerKitError(.discoveryUnavailable(serviceType: serviceType, reason: reason))
    }

    /// A peer sent a frame longer than the configured limit; its connection was closed.
    public static func frameTooLarge(length: Int, limit: Int, peer: String) -> PeerKitError {
        PeerKitError(.frameTooLarge(length: length, limit: limit, peer: peer))
    }

    /// A peer sent bytes that are not a valid PeerKit frame or envelope; its connection was closed
    /// when this happened before or during the handshake.
    public static func malformedFrame(reason: String, peer: String) -> PeerKitError {
        PeerKitError(.malformedFrame(reason: reason, peer: peer))
    }

    /// The handshake with a peer failed; the connection was closed.
    public static func handshakeFailed(reason: String, peer: String) -> PeerKitError {
        PeerKitError(.handshakeFailed(reason: reason, peer: peer))
    }

    /// A peer stopped answering pings and was disconnected.
    public static func peerTimedOut(peer: String, silence: Duration) -> PeerKitError {
        PeerKitError(.peerTimedOut(peer: peer, silence: silence))
    }

    /// A message of this type arrived, but nothing is registered to receive it.
    public static func noHandler(type: String) -> PeerKitError {
        PeerKitError(.noHandler(type: type))
    }

    /// A payload did not decode as the type registered for its wire key.
    public static func payloadDecodingFailed(type: String, reason: String) -> PeerKitError {
        PeerKitError(.payloadDecodingFailed(type: type, reason: reason))
    }

    /// A value could not be encoded as JSON.
    public static func encodingFailed(type: String, reason: String) -> PeerKitError {
        PeerKitError(.encodingFailed(type: type, reason: reason))
    }

    /// The peer is not connected, so nothing was sent.
    public static func peerNotConnected(peer: String) -> PeerKitError {
        PeerKitError(.peerNotConnected(peer: peer))
    }

    /// A peer did not read what was sent to it: its send queue stayed over
    /// ``PeerConfiguration/maximumQueuedOutboundBytes`` for longer than
    /// ``PeerConfiguration/slowPeerGracePeriod``, so it was disconnected.
    public static func peerTooSlow(peer: String, queuedBytes: Int, limit: Int, grace: Duration) -> PeerKitError {
        PeerKitError(.peerTooSlow(peer: peer, queuedBytes: queuedBytes, limit: limit, grace: grace))
    }

    /// A request got no reply in time.
    public static func requestTimedOut(type: String, peer: String, timeout: Duration) -> PeerKitError {
        PeerKitError(.requestTimedOut(type: type, peer: peer, timeout: timeout))
    }

    /// The connection to a peer closed without a goodbye (or while a request to it waited for its reply).
    public static func connectionClosed(peer: String) -> PeerKitError {
        PeerKitError(.connectionClosed(peer: peer))
    }

    /// The connection to a peer failed at the transport level (a reset, a TLS alert).
    public static func connectionFailed(peer: String, reason: String) -> PeerKitError {
        PeerKitError(.connectionFailed(peer: peer, reason: reason))
    }

    /// The remote peer answered a request with an error.
    public static func remoteError(reason: String, peer: String) -> PeerKitError {
        PeerKitError(.remoteError(reason: reason, peer: peer))
    }

    /// The remote peer answered a request with a reply of another type than expected.
    public static func unexpectedReply(expected: String, received: String, peer: String) -> PeerKitError {
        PeerKitError(.unexpectedReply(expected: expected, received: received, peer: peer))
    }

    /// No peer of the service type was connected within the timeout.
    public static func noPeerFound(serviceType: String, timeout: Duration) -> PeerKitError {
        PeerKitError(.noPeerFound(serviceType: serviceType, timeout: timeout))
    }

    /// The transceiver is not running.
    public static let notRunning = PeerKitError(.notRunning)

    /// A ``PeerKey`` could not be made (wrong length, unreadable key file, empty passphrase).
    public static func invalidKey(reason: String) -> PeerKitError {
        PeerKitError(.invalidKey(reason: reason))
    }

    /// The TLS contexts for ``PeerConfiguration/security`` could not be built.
    public static func securitySetupFailed(reason: String) -> PeerKitError {
        PeerKitError(.securitySetupFailed(reason: reason))
    }

    /// A peer that holds another pre-shared key tried to connect, or was dialled; closed during the
    /// TLS handshake, before anything was read from it.
    public static func keyMismatch(peer: String, ourKeyID: String, detail: String) -> PeerKitError {
        PeerKitError(.keyMismatch(peer: peer, ourKeyID: ourKeyID, detail: detail))
    }

    /// A peer spoke plaintext to this TLS transceiver (or answered its dial in plaintext); closed
    /// before anything it sent was read.
    public static func plaintextPeer(peer: String, security: String) -> PeerKitError {
        PeerKitError(.plaintextPeer(peer: peer, security: security))
    }

    /// A peer spoke TLS to this plaintext transceiver; closed before anything it sent was read.
    public static func tlsPeer(peer: String) -> PeerKitError {
        PeerKitError(.tlsPeer(peer: peer))
    }

    /// The peer uses TLS, but another security mode (or TLS version, or cipher suite) than this one.
    public static func securityModeMismatch(peer: String, ours: String, detail: String) -> PeerKitError {
        PeerKitError(.securityModeMismatch(peer: peer, ours: ours, detail: detail))
    }

    /// The TLS handshake with a peer failed for another reason.
    public static func securityHandshakeFailed(peer: String, reason: String) -> PeerKitError {
        PeerKitError(.securityHandshakeFailed(peer: peer, reason: reason))
    }

    /// Discovery found a peer that advertises another security mode or key id; it is not dialled.
    public static func advertisedSecurityMismatch(service: String, theirs: String, ours: String) -> PeerKitError {
        PeerKitError(.advertisedSecurityMismatch(service: service, theirs: theirs, ours: ours))
    }

    /// The admission hook (``PeerConfiguration/admission``) refused a peer; its connection was closed.
    public static func admissionRefused(peer: String) -> PeerKitError {
        PeerKitError(.admissionRefused(peer: peer))
    }

    /// The source of an outgoing resource failed (a file that cannot be read, a sequence that threw, or fewer or more bytes than its declared size).
    public static func resourceSourceFailed(name: String, reason: String) -> PeerKitError {
        PeerKitError(.resourceSourceFailed(name: name, reason: reason))
    }

    /// A received resource's SHA-256 digest differs from the one its sender computed; the bytes were discarded.
    public static func resourceDigestMismatch(name: String, peer: String) -> PeerKitError {
        PeerKitError(.resourceDigestMismatch(name: name, peer: peer))
    }

    /// A resource transfer was cancelled: by this side (``OutgoingResource/cancel()``, ``IncomingResource/cancel()``) or by the sender.
    public static func resourceCancelled(name: String, peer: String, reason: String) -> PeerKitError {
        PeerKitError(.resourceCancelled(name: name, peer: peer, reason: reason))
    }

    /// The receiver of a resource refused it (no handler for its name, one of its limits) or cancelled it while receiving it.
    public static func resourceRefused(name: String, peer: String, reason: String) -> PeerKitError {
        PeerKitError(.resourceRefused(name: name, peer: peer, reason: reason))
    }

    /// The peer does not take part in an optional protocol feature (its hello does not list it), so nothing that needs the feature was sent to it.
    public static func featureNotSupported(feature: String, peer: String) -> PeerKitError {
        PeerKitError(.featureNotSupported(feature: feature, peer: peer))
    }

    /// In certificates mode, a peer's hello claimed a peer ID that is not its certificate's public-key fingerprint; closed before any message of it was dispatched.
    public static func peerIDNotBound(peer: String, claimed: String, fingerprint: String) -> PeerKitError {
        PeerKitError(.peerIDNotBound(peer: peer, claimed: claimed, fingerprint: fingerprint))
    }

    /// In certificates mode, the peer refused our certificate (it does not trust our key); closed during the TLS handshake.
    public static func certificateRefused(peer: String, ourFingerprint: String, detail: String) -> PeerKitError {
        PeerKitError(.certificateRefused(peer: peer, ourFingerprint: ourFingerprint, detail: detail))
    }

    /// In certificates mode, a peer presented a certificate whose public key is neither pinned nor signed by a trusted CA; closed during the TLS handshake, before anything was read from it.
    public static func certificateNotTrusted(peer: String, fingerprint: String?, reason: String) -> PeerKitError {
        PeerKitError(.certificateNotTrusted(peer: peer, fingerprint: fingerprint, reason: reason))
    }

    /// A ``PeerIdentity`` or ``PeerTrust`` could not be made (unreadable or malformed PEM, a key that is not the certificate's, a key file others can read, a malformed fingerprint).
    public static func invalidIdentity(reason: String) -> PeerKitError {
        PeerKitError(.invalidIdentity(reason: reason))
    }

    /// A group name cannot be used, or this transceiver cannot join one more group.
    public static func invalidGroup(_ group: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidGroup(group, reason: reason))
    }

    /// A peer went over one of the limits on what it may make this transceiver keep (such as ``PeerConfiguration/maximumGroupsPerPeer``); it was disconnected.
    public static func peerExceededLimit(peer: String, reason: String) -> PeerKitError {
        PeerKitError(.peerExceededLimit(peer: peer, reason: reason))
    }

    /// ``PeerTransceiver/run()`` was called while the transceiver runs already.
    public static let alreadyRunning = PeerKitError(.alreadyRunning)
}

extension PeerKitError.Storage: CustomStringConvertible {
    var description: String {
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
        case let .resourceSourceFailed(name, reason):
            return "The resource \"\(name)\" could not be read: \(reason); its transfer was cancelled."
        case let .resourceDigestMismatch(name, peer):
            return "The resource \"\(name)\" from \(peer) arrived corrupted: its SHA-256 digest differs from the one the sender computed, so its bytes were discarded and no file was written under its name. Send it again."
        case let .resourceCancelled(name, peer, reason):
            return "The transfer of the resource \"\(name)\" with \(peer) was cancelled: \(reason)."
        case let .resourceRefused(name, peer, reason):
            return "\(peer.capitalizedFirst) refused the resource \"\(name)\": \(reason)."
        case let .featureNotSupported(feature, peer):
            return "\(peer.capitalizedFirst) does not take part in the \"\(feature)\" protocol feature (its hello does not list it, as with an older PeerKit), so nothing was sent. Update that peer, or send it ordinary messages."
        case let .peerIDNotBound(peer, claimed, fingerprint):
            return "\(peer.capitalizedFirst) claimed the peer ID \"\(LogSafe.text(claimed, maximumBytes: 64))\", but \(ConnectionStateMachine.unboundPeerIDReason), and its key's fingerprint is \(fingerprint); a certificate of one peer cannot be used to pose as another. The connection was closed before any of its messages was dispatched."
        case let .certificateRefused(peer, ourFingerprint, detail):
            return "\(peer.capitalizedFirst) refused our certificate (\(detail)): it does not trust our public key, fingerprint \(ourFingerprint). Pin that fingerprint on the peer, or have our certificate signed by a CA it trusts. The connection was closed before anything was read from it."
        case let .certificateNotTrusted(peer, fingerprint, reason):
            guard let fingerprint else {
                return "\(peer.capitalizedFirst) is not trusted: \(reason). In certificates mode every peer presents a certificate whose key is pinned (PeerTrust.pinned) or signed by a CA in PeerTrust.certificateAuthorities. The connection was closed before anything was read from it."
            }
            return "\(peer.capitalizedFirst) presented a certificate whose public key has the fingerprint \(fingerprint), which we do not trust: \(reason). If this peer is yours, pin that fingerprint (PeerTrust.pinned) or have its certificate signed by a CA in PeerTrust.certificateAuthorities. The connection was closed before anything was read from it."
        case let .invalidIdentity(reason):
            return "The certificate identity or trust cannot be used: \(reason). Make an identity with PeerIdentity.generate() (or `peerkit identity create PATH`) and pin its fingerprint on the other peers."
        case let .invalidGroup(group, reason):
            return "The group \"\(LogSafe.text(group, maximumBytes: 80))\" cannot be used: \(reason)."
        case let .peerExceededLimit(peer, reason):
            return "\(peer.capitalizedFirst) went over a limit and was disconnected: \(reason)."
        case .alreadyRunning:
            return "The transceiver is already running; run() it from one place only, or stop() it before running it again."
        }
    }
}

extension PeerKitError {
    /// Whether the error refused a peer for security reasons (key, mode, TLS). Such a peer is not
    /// redialled until it is discovered again, and a refusal is logged once per host and episode.
    public var isSecurityRefusal: Bool {
        switch storage {
        case .keyMismatch, .plaintextPeer, .tlsPeer, .securityModeMismatch, .securityHandshakeFailed,
             .advertisedSecurityMismatch, .admissionRefused, .certificateNotTrusted, .certificateRefused, .peerIDNotBound:
            return true
        case let .handshakeFailed(reason, _):
            // A TLS server's refusal as a plaintext client reads it (see SecurityModeSniffer), or a
            // certificate-mode peer's refusal of our peer ID.
            return reason.contains(SecurityModeSniffer.tlsRequiredReason) || reason.contains(ConnectionStateMachine.unboundPeerIDReason)
        case let .remoteError(reason, _):
            // The peer's admission hook refused us (see AdmissionGate), or it refused our peer ID.
            return reason.contains(AdmissionGate.refusedReason) || reason.contains(ConnectionStateMachine.unboundPeerIDReason)
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
