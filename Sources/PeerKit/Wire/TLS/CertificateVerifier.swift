import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import X509

/// Decides, for one connection in certificates mode, whether the certificate the peer presents in
/// the TLS handshake is trusted, as NIOSSL's custom verification callback; and remembers the
/// verdict, so that a refusal can be explained with the peer's fingerprint
/// (``TLSErrorTranslator``) and a success bound to the peer's ID (``PeerAuthenticated``).
///
/// A peer is trusted when its public key's fingerprint is pinned (whatever its certificate's
/// dates: the key is what is pinned), or when its chain validates up to one of the trusted CA
/// roots under RFC 5280 at the time of the handshake (swift-certificates' `Verifier`). That the
/// peer holds the private key of the certificate is what TLS itself proves (CertificateVerify).
final class CertificateVerifier: Sendable {
    /// The verdict on the peer's certificate.
    enum Verdict: Sendable, Equatable {
        case trusted(fingerprint: String)
        case rejected(fingerprint: String?, reason: String)
    }

    /// The most certificates accepted in a peer's chain (the leaf and its intermediates).
    static let maximumChainLength = 8

    private let trust: PeerTrust
    private let recorded = NIOLockedValueBox<Verdict?>(nil)

    init(trust: PeerTrust) {
        self.trust = trust
    }

    /// The verdict, once the callback ran.
    var verdict: Verdict? { recorded.withLockedValue { $0 } }

    /// NIOSSL's custom verification callback (runs on the channel's event loop).
    func verify(_ presented: [NIOSSLCertificate], promise: EventLoopPromise<NIOSSLVerificationResult>) {
        let chain: [Certificate]
        do {
            guard presented.count <= Self.maximumChainLength else {
                throw ChainTooLong(count: presented.count)
            }
            chain = try presented.map { try Certificate(derEncoded: try $0.toDERBytes()) }
        } catch {
            finish(.rejected(fingerprint: nil, reason: "its certificate chain cannot be read (\(error))"), promise)
            return
        }
        guard let leaf = chain.first else {
            finish(.rejected(fingerprint: nil, reason: "it presented no certificate"), promise)
            return
        }
        let fingerprint: String
        do {
            fingerprint = try PeerIdentity.fingerprint(of: leaf.publicKey)
        } catch {
            finish(.rejected(fingerprint: nil, reason: "its public key cannot be encoded (\(error))"), promise)
            return
        }
        if trust.pinnedFingerprints.contains(fingerprint) {
            finish(.trusted(fingerprint: fingerprint), promise)
            return
        }
        guard !trust.certificateAuthorities.isEmpty else {
            finish(.rejected(fingerprint: fingerprint, reason: "that key is not pinned"), promise)
            return
        }
        let roots = trust.certificateAuthorities
        let pinned = !trust.pinnedFingerprints.isEmpty
        let result = promise.futureResult.eventLoop.makePromise(of: Verdict.self)
        result.completeWithTask {
            var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
                RFC5280Policy()
            }
            switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(chain.dropFirst())) {
            case .validCertificate:
                return .trusted(fingerprint: fingerprint)
            case let .couldNotValidate(failures):
                let why = failures.first.map { "\($0.policyFailureReason)" } ?? "no chain leads to a trusted root"
                return .rejected(fingerprint: fingerprint, reason: "\(pinned ? "that key is not pinned, and " : "")its certificate is not signed by a trusted certificate authority (\(why))")
            }
        }
        result.futureResult.whenComplete { outcome in
            switch outcome {
            case let .success(verdict): self.finish(verdict, promise)
            case let .failure(error): self.finish(.rejected(fingerprint: fingerprint, reason: "its certificate chain could not be validated (\(error))"), promise)
            }
        }
    }

    private func finish(_ verdict: Verdict, _ promise: EventLoopPromise<NIOSSLVerificationResult>) {
        recorded.withLockedValue { $0 = verdict }
        if case .trusted = verdict {
            promise.succeed(.certificateVerified)
        } else {
            promise.succeed(.failed)
        }
    }

    private struct ChainTooLong: Error, CustomStringConvertible {
        var count: Int
        var description: String { "\(count) certificates, over the limit of \(CertificateVerifier.maximumChainLength)" }
    }
}
