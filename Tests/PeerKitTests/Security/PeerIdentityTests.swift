import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOSSL
import SwiftASN1
import Testing
@testable import PeerKit

@Suite("Certificate identities and trust")
struct PeerIdentityTests {
    @Test("an identity written to PEM files reads back with the same fingerprint; the key file has mode 0600")
    func roundTrip() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let identity = try PeerIdentity.generate(name: "kitchen")
        #expect(identity.fingerprint.count == 64)
        #expect(identity.fingerprint.allSatisfy { $0.isHexDigit })
        try identity.write(certificateFile: directory + "/id.pem", keyFile: directory + "/id.key")
        var info = stat()
        #expect(stat(directory + "/id.key", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let loaded = try PeerIdentity(certificateFile: directory + "/id.pem", keyFile: directory + "/id.key")
        #expect(loaded.fingerprint == identity.fingerprint)
        #expect(try PeerIdentity.generate().fingerprint != identity.fingerprint)
        // Never overwrites an identity.
        #expect(throws: PeerKitError.self) { try identity.write(certificateFile: directory + "/id.pem", keyFile: directory + "/id.key") }
    }

    @Test("a key file that group or others can read is refused with a sentence that says how to fix it")
    func readableKeyRefused() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try PeerIdentity.generate().write(certificateFile: directory + "/id.pem", keyFile: directory + "/id.key")
        chmod(directory + "/id.key", 0o644)
        do {
            _ = try PeerIdentity(certificateFile: directory + "/id.pem", keyFile: directory + "/id.key")
            Issue.record("a key file of mode 0644 was accepted")
        } catch {
            #expect(error.description.contains("has mode 644, so other users can read the private key; run chmod 600 \(directory)/id.key"), "\(error)")
        }
    }

    @Test("a key that is not the certificate's is refused")
    func mismatchedKey() throws {
        let a = try PeerIdentity.generate(), b = try PeerIdentity.generate()
        #expect(throws: PeerKitError.self) { try PeerIdentity(certificateChain: a.chain, privateKey: b.privateKey) }
    }

    @Test("pinned fingerprints are accepted in openssl's colon form and upper case; malformed ones and empty trust are refused")
    func pins() throws {
        let identity = try PeerIdentity.generate()
        let pairs = stride(from: 0, to: 64, by: 2).map { i -> String in
            let start = identity.fingerprint.index(identity.fingerprint.startIndex, offsetBy: i)
            return String(identity.fingerprint[start..<identity.fingerprint.index(start, offsetBy: 2)])
        }
        let trust = try PeerTrust.pinned([pairs.joined(separator: ":").uppercased()])
        #expect(trust.pinnedFingerprints == [identity.fingerprint])
        #expect(throws: PeerKitError.self) { try PeerTrust.pinned(["abc"]) }
        #expect(throws: PeerKitError.self) { try PeerTrust.pinned([String]()) }
    }

    @Test("the verifier trusts a pinned key, refuses an unpinned one by its fingerprint, and refuses a chain of more than 8 certificates", arguments: [1, 9])
    func verifier(chainLength: Int) async throws {
        let identity = try PeerIdentity.generate()
        var serializer = DER.Serializer()
        try serializer.serialize(try #require(identity.chain.first))
        let certificate = try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)
        let loop = EmbeddedEventLoop()
        for (pins, trusted) in [([identity.fingerprint], chainLength == 1), ([try PeerIdentity.generate().fingerprint], false)] {
            let verifier = CertificateVerifier(trust: try .pinned(pins))
            let promise = loop.makePromise(of: NIOSSLVerificationResult.self)
            verifier.verify(Array(repeating: certificate, count: chainLength), promise: promise)
            let result = try await promise.futureResult.get()
            switch (result, verifier.verdict) {
            case (.certificateVerified, .trusted(let fingerprint)?):
                #expect(trusted)
                #expect(fingerprint == identity.fingerprint)
            case (.failed, .rejected(let fingerprint, let reason)?):
                #expect(!trusted)
                if chainLength > CertificateVerifier.maximumChainLength {
                    #expect(reason.contains("9 certificates, over the limit of 8"), "\(reason)")
                } else {
                    #expect(fingerprint == identity.fingerprint)
                    #expect(reason == "that key is not pinned")
                }
            default:
                Issue.record("unexpected \(result), \(String(describing: verifier.verdict))")
            }
        }
    }

    @Test("certificates mode advertises sec=cert and refuses to dial a service that advertises another mode")
    func advertised() throws {
        let identity = try PeerIdentity.generate()
        let security = try WireSecurity(security: .certificates(identity, trust: try .pinned([identity.fingerprint])), serviceType: "listrctl")
        #expect(security.txtRecord == ["sec": "cert"])
        func service(_ txt: [String: String]) -> DiscoveredService {
            DiscoveredService(key: "x", name: "other", peerID: "p", endpoints: [], txtRecord: txt)
        }
        let psk = try #require(security.refusal(of: service(["sec": "psk", "keyid": "0123456789abcdef"])))
        #expect(psk.description.contains("advertises security psk (key id 0123456789abcdef), and ours is cert"), "\(psk)")
        #expect(security.refusal(of: service(["sec": "none"])) != nil)
        #expect(security.refusal(of: service(["sec": "cert"])) == nil)
        #expect(PeerTransceiver(configuration: certificateConfiguration(serviceType: "x", name: "x", identity: identity, trust: try .pinned([identity.fingerprint]))).peerID == identity.fingerprint)
    }
}
