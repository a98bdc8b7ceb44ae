import Crypto
import Foundation
import SwiftASN1
import X509

/// A peer's own key pair and certificate, for ``PeerSecurity/certificates(_:trust:)``.
///
/// Each peer has its own identity. Make one with ``generate(name:validity:)`` (a P-256 key and a
/// self-signed certificate) and save it with ``write(certificateFile:keyFile:)``, or load one a CA
/// issued with ``init(certificateFile:keyFile:)``. Other peers trust it by its ``fingerprint``
/// (``PeerTrust/pinned(_:)``) or by the CA that signed it (``PeerTrust/certificateAuthorities(_:)``).
///
/// In certificates mode the transceiver's peer ID *is* the fingerprint: a peer cannot claim an
/// ID other than the one its key proves.
public struct PeerIdentity: Sendable, CustomStringConvertible {
    /// The certificate chain, leaf first (a self-signed identity has one certificate).
    let chain: [Certificate]
    /// The private key of the leaf certificate.
    let privateKey: Certificate.PrivateKey

    /// The SHA-256 fingerprint of the leaf certificate's public key (its DER SubjectPublicKeyInfo),
    /// as 64 lowercase hexadecimal digits: what peers pin, and this peer's ID in certificates mode.
    ///
    /// The same figure as `openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | sha256sum`.
    /// It names the key, not the certificate: a certificate renewed for the same key keeps it.
    public let fingerprint: String

    /// The leaf certificate in PEM.
    public var certificatePEM: String {
        // Serializing a certificate that was parsed or built by swift-certificates cannot fail.
        chain.compactMap { try? $0.serializeAsPEM().pemString }.joined(separator: "\n") + "\n"
    }

    /// "certificate identity <fingerprint>": public, never the key.
    public var description: String { "certificate identity \(fingerprint)" }

    /// An identity from a certificate chain (leaf first) and the leaf's private key.
    /// - Throws: ``PeerKitError/invalidIdentity(reason:)`` when the chain is empty or the key is not
    ///   the leaf certificate's.
    public init(certificateChain: [Certificate], privateKey: Certificate.PrivateKey) throws(PeerKitError) {
        guard let leaf = certificateChain.first else {
            throw PeerKitError.invalidIdentity(reason: "the certificate chain is empty")
        }
        guard leaf.publicKey == privateKey.publicKey else {
            throw PeerKitError.invalidIdentity(reason: "the private key is not the key of the certificate (its public key differs)")
        }
        self.chain = certificateChain
        self.privateKey = privateKey
        self.fingerprint = try Self.fingerprint(of: leaf.publicKey)
    }

    /// A new identity: a P-256 key from swift-crypto and a self-signed certificate for it from
    /// swift-certificates, valid for `validity` from now (an hour earlier, for clocks that lag).
    ///
    /// - Parameters:
    ///   - name: the certificate's common name, for people reading it; PeerKit identifies the
    ///     peer by its ``fingerprint``, never by this name.
    ///   - validity: how long the certificate is valid from now (default ten years).
    public static func generate(name: String = "PeerKit peer", validity: Duration = .seconds(10 * 365 * 24 * 3600)) throws(PeerKitError) -> PeerIdentity {
        let key = P256.Signing.PrivateKey()
        let privateKey = Certificate.PrivateKey(key)
        let now = Date()
        do {
            let subject = try DistinguishedName { CommonName(name) }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: privateKey.publicKey,
                notValidBefore: now.addingTimeInterval(-3600),
                notValidAfter: now.addingTimeInterval(Double(validity.components.seconds)),
                issuer: subject,
                subject: subject,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([.serverAuth, .clientAuth])
                    SubjectKeyIdentifier(hash: privateKey.publicKey)
                },
                issuerPrivateKey: privateKey
            )
            return try PeerIdentity(certificateChain: [certificate], privateKey: privateKey)
        } catch let error as PeerKitError {
            throw error
        } catch {
            throw PeerKitError.invalidIdentity(reason: "a self-signed certificate could not be made (\(error))")
        }
    }

    /// Parses an identity from PEM text: the certificate chain (leaf first) and the private key
    /// (PKCS#8, SEC1 or RSA).
    public init(certificatePEM: String, privateKeyPEM: String) throws(PeerKitError) {
        let chain: [Certificate]
        do {
            chain = try PEMDocument.parseMultiple(pemString: certificatePEM).map { try Certificate(pemDocument: $0) }
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the certificate is not a PEM certificate (\(error))")
        }
        let key: Certificate.PrivateKey
        do {
            key = try Certificate.PrivateKey(pemEncoded: privateKeyPEM)
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the private key is not a PEM private key (\(error))")
        }
        try self.init(certificateChain: chain, privateKey: key)
    }

    /// Loads an identity from a certificate file and a key file, both PEM.
    ///
    /// The key file must not be readable by group or others (mode 0600 or stricter): a key others
    /// can read is refused, with a sentence saying how to fix it.
    public init(certificateFile: String, keyFile: String) throws(PeerKitError) {
        try Self.checkPrivate(keyFile)
        let certificate = try Self.read(certificateFile, what: "certificate file")
        let key = try Self.read(keyFile, what: "key file")
        do {
            try self.init(certificatePEM: certificate, privateKeyPEM: key)
        } catch where error.code == .invalidIdentity {
            throw PeerKitError.invalidIdentity(reason: "\(error.reason ?? "\(error)") (in \(certificateFile) and \(keyFile))")
        }
    }

    /// Writes the certificate chain (mode 0644) and the private key (PKCS#8, mode 0600) as PEM.
    /// The key file is created with mode 0600 before anything is written to it; an existing
    /// file is not overwritten.
    public func write(certificateFile: String, keyFile: String) throws(PeerKitError) {
        let keyPEM: String
        do {
            keyPEM = try privateKey.serializeAsPEM().pemString + "\n"
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the private key cannot be written as PEM (\(error))")
        }
        try Self.create(keyFile, contents: keyPEM, mode: 0o600)
        try Self.create(certificateFile, contents: certificatePEM, mode: 0o644)
    }

    // MARK: Fingerprints

    /// The SHA-256 of a public key's DER SubjectPublicKeyInfo, in lowercase hex.
    static func fingerprint(of publicKey: Certificate.PublicKey) throws(PeerKitError) -> String {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(publicKey)
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the public key cannot be encoded (\(error))")
        }
        return SHA256.hash(data: serializer.serializedBytes).map { String(format: "%02x", $0) }.joined()
    }

    /// The fingerprint written as 64 lowercase hex digits, from one written with upper case
    /// letters, colons or spaces between bytes (as `openssl` prints them); nil when it is not 32 bytes of hex.
    static func normalizedFingerprint(_ text: String) -> String? {
        let digits = text.lowercased().filter { $0 != ":" && $0 != " " }
        guard digits.count == 64, digits.allSatisfy(\.isHexDigit) else { return nil }
        return digits
    }

    // MARK: Files

    /// Refuses a key file that group or others may read (or that does not exist), with a sentence.
    static func checkPrivate(_ path: String) throws(PeerKitError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw PeerKitError.invalidIdentity(reason: "the key file \(path) cannot be read (\(String(cString: strerror(errno))))")
        }
        let mode = info.st_mode & 0o777
        if mode & 0o077 != 0 {
            throw PeerKitError.invalidIdentity(reason: "the key file \(path) has mode \(String(mode, radix: 8)), so other users can read the private key; run chmod 600 \(path)")
        }
    }

    /// The largest certificate or key file read: 64 KiB. A PEM certificate chain of a few
    /// certificates, or a 4096-bit RSA key, is a few KiB; a larger file (a FIFO, a folder, a 1 GiB
    /// file given by mistake) is refused with a sentence before it is read.
    static let maximumFileBytes = 64 * 1024

    private static func read(_ path: String, what: String) throws(PeerKitError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try SmallFile.read(path, maximumBytes: maximumFileBytes, what: "a PEM \(what)").bytes
        } catch {
            throw PeerKitError.invalidIdentity(reason: "the \(what) \(path) cannot be used: \(error.reason)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw PeerKitError.invalidIdentity(reason: "the \(what) \(path) is not text (PEM)")
        }
        return text
    }

    /// Creates `path` with `mode` (refusing to replace an existing file) and writes `contents`.
    private static func create(_ path: String, contents: String, mode: mode_t) throws(PeerKitError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw PeerKitError.invalidIdentity(reason: "\(path) cannot be created (\(reason)); an existing identity is never overwritten")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: Data(contents.utf8))
            try handle.close()
        } catch {
            throw PeerKitError.invalidIdentity(reason: "\(path) cannot be written (\(error))")
        }
    }
}
