#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOSSL
import Testing
@testable import PeerKit

/// The sentences of TLS handshake failures, on the translator alone (no I/O).
@Suite("TLS handshake errors in PeerKit's terms")
struct TLSErrorTranslatorTests {
    let peer = "the chat peer at 127.0.0.1:5000"
    let security = PeerSecurity.preSharedKey(PeerKey.random())

    func translate(_ error: any Error, inbound: Bool = false) -> PeerKitError {
        TLSErrorTranslator.translate(error, peer: peer, security: security, inbound: inbound)
    }

    @Test("a handshake the peer cut off is one failure however NIOSSL saw it: closed, EOF during the handshake, or reset", arguments: [
        (NIOSSLError.uncleanShutdown as any Error, "closed"),
        (NIOSSLError.handshakeFailed(.sslError([.eofDuringHandshake])) as any Error, "closed"),
        (IOError(errnoCode: ECONNRESET, reason: "read(descriptor:pointer:size:)") as any Error, "reset"),
    ])
    func cutOff(error: any Error, how: String) {
        let dialled = translate(error)
        #expect(dialled == .securityHandshakeFailed(peer: peer, reason: TLSErrorTranslator.cutOff(how, inbound: false)))
        #expect(dialled.description.contains("without a TLS alert, so no key was compared"), "\(dialled)")
        #expect(dialled.description.contains("it is dialled again with back-off"), "\(dialled)")
        let accepted = translate(error, inbound: true)
        #expect(accepted == .securityHandshakeFailed(peer: peer, reason: TLSErrorTranslator.cutOff(how, inbound: true)))
    }

    @Test("another failure the translator does not know is named as TLS said it")
    func unknown() {
        let error = translate(NIOSSLError.handshakeFailed(.sslError([])))
        #expect(error.code == .securityHandshakeFailed)
        #expect(error.reason?.hasPrefix("TLS said") == true, "\(error)")
        #expect(error.reason?.contains("no key was compared") == false, "\(error)")
    }
}
