#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOSSL
import NIOTLS

/// Sits above the TLS handler and turns its errors into ``PeerKitError`` sentences that say what
/// went wrong in PeerKit's terms ("does not share our pre-shared key"), for the connection handler
/// to report. Nothing passes it before the TLS handshake succeeded, because the TLS handler
/// delivers no data before then.
///
/// In certificates mode it also tells the connection handler whose key the handshake verified
/// (``PeerAuthenticated``), and it keeps translating until the peer's first bytes arrive: in
/// TLS 1.3 a client's handshake completes before the server has checked the client's
/// certificate, so the server's refusal of it arrives after `handshakeCompleted`.
final class TLSErrorTranslator: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let security: WireSecurity
    private let inbound: Bool
    private let verifier: CertificateVerifier?
    private var handshakeCompleted = false
    private var peerSpoke = false

    init(security: WireSecurity, inbound: Bool, verifier: CertificateVerifier? = nil) {
        self.security = security
        self.inbound = inbound
        self.verifier = verifier
    }

    /// Whether a TLS error now is still about the handshake (and so a refusal to explain).
    private var settled: Bool {
        handshakeCompleted && (verifier == nil || peerSpoke)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        peerSpoke = true
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            handshakeCompleted = true
            if let verifier {
                guard case let .trusted(fingerprint) = verifier.verdict else {
                    // Cannot happen: the handshake fails unless the verifier trusted the peer.
                    let peer = security.describe(context.channel.remoteAddress)
                    context.fireErrorCaught(PeerKitError.certificateNotTrusted(peer: peer, fingerprint: nil, reason: "the TLS handshake completed without its certificate being verified"))
                    context.close(promise: nil)
                    return
                }
                context.fireUserInboundEventTriggered(PeerAuthenticated(fingerprint: fingerprint))
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is PeerKitError || settled {
            context.fireErrorCaught(error)
            return
        }
        let peer = security.describe(context.channel.remoteAddress)
        context.fireErrorCaught(Self.translate(error, peer: peer, security: security.security, inbound: inbound, verdict: verifier?.verdict))
    }

    /// The sentence for a TLS error during the handshake with `peer`; `verdict` is what our
    /// ``CertificateVerifier`` said of the peer's certificate in certificates mode.
    static func translate(_ error: any Error, peer: String, security: PeerSecurity, inbound: Bool, verdict: CertificateVerifier.Verdict? = nil) -> PeerKitError {
        let text = String(describing: error)
        let has = { (names: [String]) in names.contains { text.contains($0) } }
        switch security {
        case let .certificates(identity, _):
            if case let .rejected(fingerprint, reason) = verdict {
                return .certificateNotTrusted(peer: peer, fingerprint: fingerprint, reason: reason)
            }
            if has(["ALERT_CERTIFICATE_UNKNOWN", "ALERT_BAD_CERTIFICATE", "ALERT_UNKNOWN_CA", "CERTIFICATE_REQUIRED",
                    "ALERT_CERTIFICATE_EXPIRED", "ALERT_CERTIFICATE_REVOKED", "ALERT_UNSUPPORTED_CERTIFICATE", "ALERT_ACCESS_DENIED"]) {
                return .certificateRefused(peer: peer, ourFingerprint: identity.fingerprint, detail: detail(of: text))
            }
            if has(["PEER_DID_NOT_RETURN_A_CERTIFICATE", "NO_CERTIFICATE_RETURNED"]) {
                return .certificateNotTrusted(peer: peer, fingerprint: nil, reason: "it presented no certificate, and certificates mode requires one of every peer")
            }
            if has(["NO_SHARED_CIPHER", "HANDSHAKE_FAILURE", "PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "WRONG_VERSION_NUMBER", "NO_CIPHERS_AVAILABLE", "PSK_IDENTITY"]) {
                return .securityModeMismatch(peer: peer, ours: "cert (mutual TLS 1.3)", detail: detail(of: text))
            }
        case let .preSharedKey(key):
            if has(["PSK_IDENTITY_NOT_FOUND", "UNKNOWN_PSK_IDENTITY", "BAD_RECORD_MAC", "DECRYPT_ERROR", "DIGEST_CHECK_FAILED"]) {
                return .keyMismatch(peer: peer, ourKeyID: key.keyID, detail: detail(of: text))
            }
            if has(["NO_SHARED_CIPHER", "HANDSHAKE_FAILURE", "PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "WRONG_VERSION_NUMBER", "NO_CIPHERS_AVAILABLE"]) {
                return .securityModeMismatch(peer: peer, ours: security.txtValue, detail: detail(of: text))
            }
        case .none:
            break
        }
        // A close during the handshake reaches us as an unclean shutdown, or, when NIOSSL's
        // handler sees the channel go inactive mid-handshake, as its synthetic "EOF during
        // handshake": the same cut-off, whichever of the two races ahead.
        if let ssl = error as? NIOSSLError, ssl == .uncleanShutdown || ssl == .handshakeFailed(.sslError([.eofDuringHandshake])) {
            return .securityHandshakeFailed(peer: peer, reason: cutOff("closed", inbound: inbound))
        }
        if let io = error as? IOError, io.errnoCode == ECONNRESET {
            return .securityHandshakeFailed(peer: peer, reason: cutOff("reset", inbound: inbound))
        }
        return .securityHandshakeFailed(peer: peer, reason: detail(of: text))
    }

    /// Why a handshake the peer cut off (it `how` the connection) failed: without a TLS alert, no key
    /// was compared. A dial of ours is tried again (see ConnectionManager.connectionClosed).
    static func cutOff(_ how: String, inbound: Bool) -> String {
        let then = inbound ? "" : ", and it is dialled again with back-off"
        return "the peer \(how) the connection during the TLS handshake without a TLS alert, so no key was compared (a peer with another key says so with an alert); it is busy, with its pending handshakes at their limit, or going away\(then)"
    }

    /// The BoringSSL reason names in an error's text ("SSLV3_ALERT_BAD_RECORD_MAC"), or the text.
    static func detail(of text: String) -> String {
        // BoringSSL details read "error:10000410:SSL routines:OPENSSL_internal:SSLV3_ALERT_HANDSHAKE_FAILURE".
        let names = text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") })
            .compactMap { part -> String? in
                guard part.contains("OPENSSL_internal:") else { return nil }
                return part.split(separator: ":").last.map(String.init)
            }
        return names.isEmpty ? "TLS said: \(text)" : "TLS said " + names.joined(separator: ", ")
    }
}
