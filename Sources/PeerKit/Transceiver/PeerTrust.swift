import Foundation
import SwiftASN1
import X509

/// Which peers a ``PeerSecurity/certificates(_:trust:)`` transceiver accepts: those whose public
/// key is pinned by its fingerprint, and those whose certificate a trusted CA signed.
///
/// ```swift
/// // Pin the peers you know (`peerkit identity create` prints a new identity's fingerprint):
/// let trust = try PeerTrust.pinned(["3f5a…", "91c0…"])
/// // Or trust every peer your own CA issued a certificate to:
/// let trust = try PeerTrust.certificateAuthorities(file: "/etc/myapp/ca.pem")
/// ```
///
/// A peer trusted either way still has to use its key's fingerprint as its peer ID.
public struct PeerTrust: Sendable, CustomStringConvertible {
    /// Public-key fingerprints (64 lowercase hex digits, see ``PeerIdentity/fingerprint``) of
    /// trusted peers.
    public let pinnedFingerprints: Set<String>
    /// Root certificates: a peer whose certificate chains up to one of them (RFC 5280 path
    /// validation by swift-certificates, at the time of the handshake) is trusted.
    public let certificateAuthorities: [Certificate]

    /// Trusts the pinned fingerprints and the certificate authorities.
    /// - Throws: ``PeerKitError/invalidIdentity(reason:)`` for a fingerprint that is not 32 bytes
    ///   of hex (colons and spaces between bytes, and upper case, are accepted), or when both are empty.
    public init(pinnedFingerprints: some Sequence<String> = [], certificateAuthorities: [Certificate] = []) throws(PeerKitError) {
        var pins: Set<String> = []
        for text in pinnedFingerprints {
            guard let fingerprint = PeerIdentity.normalizedFingerprint(text) else {
                throw PeerKitError.invalidIdentity(reason: "the pinned fingerprint \"\(LogSafe.text(text, maximumBytes: 100))\" is not a SHA-256 fingerprint (64 hexadecimal digits)")
            }
            pins.insert(fingerprint)
        }
        guard !pins.isEmpty || !certificateAuthorities.isEmpty else {
            throw PeerKitError.invalidIdentity(reason: "no peer would be trusted: pin at least one fingerprint or name a certificate authority")
        }
        self.pinnedFingerprints = pins
        self.certificateAuthorities = certificateAuthorities
    }

    /// Trusts exactly the peers whose public keys have these fingerprints.
    public static func pinned(_ fingerprints: some Sequence<String>) throws(PeerKitError) -> PeerTrust {
        try PeerTrust(pinnedFingerprints: fingerprints)
    }

    /// Trusts every peer whose certificate one of these CA root certificates signed.
    public static func certificateAuthorities(_ roots: [Certificate]) throws(PeerKitError) -> PeerTrust {
        try PeerTrust(certificateAuthorities: roots)
    }

    /// Trusts every peer whose certificate one of the CA root certificates in a PEM file signed.
    public static func certificateAuthorities(file path: String) throws(PeerKitError) -> PeerTrust {
        try PeerTrust(certificateAuthorities: certificates(inFile: path))
    }

    /// The largest CA file read: 1 MiB, room for a few hundred root certificates (a whole
    /// system bundle is about 200 KiB). A larger file, a FIFO or a folder is refused with a
    /// sentence before it is read.
    static let maximumCAFileBytes = 1024 * 1024

    /// The certificates of a PEM file.
    static func certificates(inFile path: String) throws(PeerKitError) -> [Certificate] {
        let bytes: [UInt8]
        do {
            bytes = try SmallFile.read(path, maximumBytes: maximumCAFileBytes, what: "a PEM CA file").bytes
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the CA file \(path) cannot be used: \(error.reason)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw PeerKitError.invalidIdentity(reason: "the CA file \(path) is not text (PEM)")
        }
        do {
            return try PEMDocument.parseMultiple(pemString: text).map { try Certificate(pemDocument: $0) }
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the CA file \(path) does not hold PEM certificates (\(error))")
        }
    }

    /// "2 pinned keys and 1 CA".
    public var description: String {
        var parts: [String] = []
        if !pinnedFingerprints.isEmpty { parts.append("\(pinnedFingerprints.count) pinned key\(pinnedFingerprints.count == 1 ? "" : "s")") }
        if !certificateAuthorities.isEmpty { parts.append("\(certificateAuthorities.count) CA\(certificateAuthorities.count == 1 ? "" : "s")") }
        return parts.joined(separator: " and ")
    }
}
