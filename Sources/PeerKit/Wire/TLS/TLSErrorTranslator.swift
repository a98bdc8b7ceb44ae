import NIOCore
import NIOSSL
import NIOTLS

/// Sits above the TLS handler and turns its errors into ``PeerKitError`` sentences that say what
/// went wrong in PeerKit's terms ("does not share our pre-shared key"), for the connection handler
/// to report. Nothing passes it before the TLS handshake succeeded, because the TLS handler
/// delivers no data before then.
final class TLSErrorTranslator: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let security: WireSecurity
    private let inbound: Bool
    private var handshakeCompleted = false

    init(security: WireSecurity, inbound: Bool) {
        self.security = security
        self.inbound = inbound
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            handshakeCompleted = true
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is PeerKitError || handshakeCompleted {
            context.fireErrorCaught(error)
            return
        }
        let peer = security.describe(context.channel.remoteAddress)
        context.fireErrorCaught(Self.translate(error, peer: peer, security: security.security, inbound: inbound))
    }

    /// The sentence for a TLS error during the handshake with `peer`.
    static func translate(_ error: any Error, peer: String, security: PeerSecurity, inbound: Bool) -> PeerKitError {
        let text = String(describing: error)
        let has = { (names: [String]) in names.contains { text.contains($0) } }
        switch security {
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
        if let ssl = error as? NIOSSLError, case .uncleanShutdown = ssl {
            return .securityHandshakeFailed(peer: peer, reason: "the peer closed the connection during the TLS handshake, which is what a peer that refused us does")
        }
        return .securityHandshakeFailed(peer: peer, reason: detail(of: text))
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
