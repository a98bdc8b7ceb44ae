import Crypto
import Foundation
import PeerKit
import X509

/// `--security cert`: every benchmark process issues itself a certificate from the same CA, whose
/// key is fixed (loopback only: it protects nothing), so that separate processes trust each other
/// without exchanging fingerprints. Each process signs its own copy of the CA certificate with the
/// fixed key; a peer's certificate validates against any of them (same subject, same key).
enum BenchAuthority {
    static func security() throws -> PeerSecurity {
        let caKey = Certificate.PrivateKey(try P256.Signing.PrivateKey(rawRepresentation: (1...32).map { UInt8($0) }))
        let caName = try DistinguishedName { CommonName("peerkit-bench CA") }
        let now = Date()
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: caKey.publicKey,
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: caKey
        )
        let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: key.publicKey,
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86400),
            issuer: caName, subject: try DistinguishedName { CommonName("peerkit-bench") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
            },
            issuerPrivateKey: caKey
        )
        return .certificates(try PeerIdentity(certificateChain: [leaf], privateKey: key), trust: try .certificateAuthorities([ca]))
    }
}
