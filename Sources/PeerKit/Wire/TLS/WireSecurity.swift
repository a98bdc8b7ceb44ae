import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SwiftASN1
import X509

/// ``PeerSecurity`` made ready for the wire at start: the TLS contexts for accepted and dialled
/// connections, what to advertise, and the once-per-episode log of refused peers.
final class WireSecurity: Sendable {
    /// The mode this was made from.
    let security: PeerSecurity
    /// The service type, for sentences ("the listrd peer at …").
    let serviceType: String
    private let serverContext: NIOSSLContext?
    private let clientContext: NIOSSLContext?
    private let refusals = NIOLockedValueBox(RefusalLog())

    /// The only cipher suite of ``PeerSecurity/preSharedKey(_:)``: ECDHE for forward secrecy,
    /// ChaCha20-Poly1305 for authenticated encryption.
    static let pskCipherSuite = "ECDHE-PSK-CHACHA20-POLY1305"

    /// Builds the TLS contexts.
    init(security: PeerSecurity, serviceType: String) throws(PeerKitError) {
        self.security = security
        self.serviceType = serviceType
        switch security {
        case .none:
            serverContext = nil
            clientContext = nil
        case let .preSharedKey(key):
            do {
                serverContext = try NIOSSLContext(configuration: Self.pskConfiguration(key: key, server: true))
                clientContext = try NIOSSLContext(configuration: Self.pskConfiguration(key: key, server: false))
            } catch {
                throw PeerKitError.securitySetupFailed(reason: "TLS with the pre-shared key could not be set up (\(error))")
            }
        case let .certificates(identity, _):
            do {
                serverContext = try NIOSSLContext(configuration: Self.certificateConfiguration(identity: identity, server: true))
                clientContext = try NIOSSLContext(configuration: Self.certificateConfiguration(identity: identity, server: false))
            } catch {
                throw PeerKitError.securitySetupFailed(reason: "mutual TLS with the certificate \(identity.fingerprint) could not be set up (\(error))")
            }
        }
    }

    /// Plaintext, for tests of the pipeline that do not care about security.
    static let plaintext: WireSecurity = {
        do { return try WireSecurity(security: .none, serviceType: "peerkit") } catch { fatalError("plaintext needs no TLS context: \(error)") }
    }()

    /// Whether connections use TLS.
    var usesTLS: Bool { serverContext != nil }

    /// The TXT pairs that advertise the mode: `sec`, and for a pre-shared key `keyid`.
    var txtRecord: [String: String] {
        switch security {
        case .none: return ["sec": "none"]
        case let .preSharedKey(key): return ["sec": "psk", "keyid": key.keyID]
        case .certificates: return ["sec": "cert"]
        }
    }

    /// The refusal of a discovered service whose TXT record advertises another mode or key id, or nil
    /// when it may be dialled (also when it advertises no `sec` key: the TLS handshake decides).
    func refusal(of service: DiscoveredService) -> PeerKitError? {
        guard let theirs = service.txtRecord["sec"] else { return nil }
        let ours = txtRecord
        let theirKeyID = service.txtRecord["keyid"]
        guard theirs != ours["sec"] || theirKeyID != ours["keyid"] else { return nil }
        func describe(_ mode: String, _ keyID: String?) -> String {
            keyID.map { "\(mode) (key id \($0))" } ?? mode
        }
        return .advertisedSecurityMismatch(
            service: service.name,
            theirs: describe(theirs, theirKeyID),
            ours: describe(ours["sec"] ?? "none", ours["keyid"])
        )
    }

    static func pskConfiguration(key: PeerKey, server: Bool) -> TLSConfiguration {
        var configuration = TLSConfiguration.makePreSharedKeyConfiguration()
        // BoringSSL offers external PSKs with TLS 1.2 only.
        configuration.minimumTLSVersion = .tlsv12
        configuration.maximumTLSVersion = .tlsv12
        configuration.cipherSuites = pskCipherSuite
        configuration.certificateVerification = .none
        let identity = PSKIdentity.identity(for: key)
        let secret = key.bytes
        if server {
            configuration.pskHint = identity
            configuration.pskServerProvider = { context in
                // A client that names another key id cannot hold our key: refuse it by name.
                guard context.clientIdentity == identity else { throw PSKIdentityRefused() }
                var bytes = NIOSSLSecureBytes()
                bytes.append(secret)
                return PSKServerIdentityResponse(key: bytes)
            }
        } else {
            configuration.pskClientProvider = { _ in
                var bytes = NIOSSLSecureBytes()
                bytes.append(secret)
                return PSKClientIdentityResponse(key: bytes, identity: identity)
            }
        }
        return configuration
    }

    /// TLS 1.3 only, a certificate required of the peer (both ways), and its verification left to
    /// ``CertificateVerifier`` (pinned fingerprints or CA roots), which each handler is given.
    static func certificateConfiguration(identity: PeerIdentity, server: Bool) throws -> TLSConfiguration {
        let chain = try identity.chain.map { certificate -> NIOSSLCertificateSource in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return .certificate(try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der))
        }
        let key = try NIOSSLPrivateKey(bytes: try identity.privateKey.serializeAsPEM().derBytes, format: .der)
        var configuration = server
            ? TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            : TLSConfiguration.makeClientConfiguration()
        configuration.certificateChain = chain
        configuration.privateKey = .privateKey(key)
        configuration.minimumTLSVersion = .tlsv13
        configuration.maximumTLSVersion = .tlsv13
        // Peers have no host names: the verifier checks the key, not a name. A server requires
        // the client's certificate with this setting.
        configuration.certificateVerification = .noHostnameVerification
        // The custom verification callback replaces BoringSSL's; no system roots are loaded.
        configuration.trustRoots = .certificates([])
        configuration.sendCANameList = false
        return configuration
    }

    /// Adds the handlers that go before framing: the mode sniffer, and with TLS the TLS handler and
    /// the translator of its errors. Call on the channel's event loop. `firstBytesTimeout` bounds
    /// how long the peer may take to send its first bytes (see ``SecurityModeSniffer``).
    func addHandlers(to channel: any Channel, inbound: Bool, firstBytesTimeout: (timeout: TimeAmount, clock: PeerClock)? = nil) throws {
        let operations = channel.pipeline.syncOperations
        let sniffer = SecurityModeSniffer(expectsTLS: usesTLS, inbound: inbound, security: self, firstBytesTimeout: firstBytesTimeout)
        try operations.addHandler(sniffer)
        var verifier: CertificateVerifier?
        if case let .certificates(_, trust) = security {
            verifier = CertificateVerifier(trust: trust)
        }
        if inbound, let serverContext {
            if let verifier {
                try operations.addHandler(NIOSSLServerHandler(context: serverContext, customVerificationCallback: verifier.verify))
            } else {
                try operations.addHandler(NIOSSLServerHandler(context: serverContext))
            }
        } else if !inbound, let clientContext {
            if let verifier {
                try operations.addHandler(try NIOSSLClientHandler(context: clientContext, serverHostname: nil, customVerificationCallback: verifier.verify))
            } else {
                try operations.addHandler(try NIOSSLClientHandler(context: clientContext, serverHostname: nil))
            }
        }
        if usesTLS {
            try operations.addHandler(TLSErrorTranslator(security: self, inbound: inbound, verifier: verifier))
        }
    }

    /// "the listrd peer at 127.0.0.1:41234", for sentences.
    func describe(_ address: SocketAddress?) -> String {
        "the \(serviceType) peer at \(address.map(Self.hostPort) ?? "an unknown address")"
    }

    static func hostPort(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: return address.pathname ?? "a Unix socket"
        }
    }

    // MARK: Refusals

    /// Whether to log `error`, a refusal of a connection from or to `address`: once per remote
    /// host and kind of refusal (its code) per episode (an episode ends after
    /// ``RefusalLog/episodeGap`` without such a refusal from that host). Keying on the code too
    /// means that one kind of refusal does not hide another: a member whose dial timed out in the
    /// TLS handshake does not silence, for a minute, the refusal of a stranger's certificate from
    /// the same address. There are a dozen refusal codes, so a host gets at most that many lines
    /// per episode.
    func shouldLog(_ error: PeerKitError, remote address: String, now: NIODeadline = .now()) -> Bool {
        guard error.isSecurityRefusal else { return true }
        let host = address.split(separator: ":").dropLast().joined(separator: ":")
        let key = RefusalLog.Key(host: host.isEmpty ? address : host, code: error.code)
        return refusals.withLockedValue { $0.shouldLog(key, now: now) }
    }

    /// Refusals that were logged, by host and kind, with when each was last seen.
    struct RefusalLog {
        /// A host refused again in the same way within this time is in the same episode and is
        /// not logged again.
        static let episodeGap = TimeAmount.seconds(60)
        /// The most hosts and kinds remembered; past it the oldest is forgotten (and may be
        /// logged again).
        static let maximumEntries = 1024

        /// A remote host and the code of its refusal.
        struct Key: Hashable {
            var host: String
            var code: PeerKitError.Code
        }

        var lastRefused: [Key: NIODeadline] = [:]

        mutating func shouldLog(_ key: Key, now: NIODeadline) -> Bool {
            defer { lastRefused[key] = now }
            if let last = lastRefused[key], now - last < Self.episodeGap { return false }
            if lastRefused.count >= Self.maximumEntries, let oldest = lastRefused.min(by: { $0.value < $1.value })?.key {
                lastRefused[oldest] = nil
            }
            return true
        }
    }
}

/// Thrown by the server's PSK provider for a client that names another key id.
struct PSKIdentityRefused: Error {}
