import Testing
@testable import PeerKit

/// Every code's sentence, word for word. These are the sentences the error had before its codes
/// were split into topic files (`Sources/PeerKit/Errors/`); a new code adds its sentence here.
@Suite("PeerKitError sentences (every code)")
struct PeerKitErrorSentenceTests {
    static let peer = "the peer \"Kitchen\" at 127.0.0.1:5000"

    static let sentences: [(PeerKitError, String)] = {
        let p = peer
        return [
            (.invalidServiceType("Bad_Type", reason: "it contains \"_\""),
             "The service type \"Bad_Type\" is not a valid DNS-SD service name: it contains \"_\". Use 1 to 15 lowercase letters, digits and hyphens, with at least one letter, for example \"listrctl\"."),
            (.invalidDiscoveryInfo(key: "k=v", reason: "the key contains \"=\""),
             "The discovery info entry \"k=v\" cannot be advertised: the key contains \"=\"."),
            (.invalidPeerName("bell\u{7}" + String(repeating: "x", count: 100), reason: "it is too long"),
             "The peer name \"bell\\u{7}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…\" cannot be used: it is too long. Set PeerConfiguration.peerName to 1 to 63 bytes of UTF-8."),
            (.invalidConfiguration(property: "heartbeatInterval", reason: "it must be positive"),
             "PeerConfiguration.heartbeatInterval cannot be used: it must be positive."),
            (.listenFailed(address: "127.0.0.1:80", reason: "permission denied"),
             "PeerKit could not listen on 127.0.0.1:80: permission denied. Choose another port or address in PeerConfiguration."),
            (.discoveryUnavailable(serviceType: "listrctl", reason: "avahi-daemon is not running"),
             "Peers of service type \"listrctl\" cannot be discovered: avahi-daemon is not running. Start avahi-daemon (and the D-Bus system bus it needs), or configure static peers with PeerConfiguration.discovery = .staticPeers([...])."),
            (.frameTooLarge(length: 4294967295, limit: 16777216, peer: p),
             "A frame of 4294967295 bytes exceeds the 16777216-byte limit; the connection to the peer \"Kitchen\" at 127.0.0.1:5000 was closed."),
            (.malformedFrame(reason: "not JSON", peer: p),
             "the peer \"Kitchen\" at 127.0.0.1:5000 sent a malformed frame: not JSON."),
            (.handshakeFailed(reason: "no hello", peer: p),
             "The handshake with the peer \"Kitchen\" at 127.0.0.1:5000 failed: no hello."),
            (.peerTimedOut(peer: p, silence: .milliseconds(2500)),
             "the peer \"Kitchen\" at 127.0.0.1:5000 did not answer for 2.5 s and was disconnected."),
            (.noHandler(type: "Question\n" + String(repeating: "y", count: 100)),
             "No handler for type Question\\nyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy…."),
            (.payloadDecodingFailed(type: "Question", reason: "missing key \"text\""),
             "The payload of a Question message could not be decoded: missing key \"text\"."),
            (.encodingFailed(type: "Answer", reason: "NaN"),
             "A Answer value could not be encoded as JSON: NaN."),
            (.peerNotConnected(peer: p),
             "the peer \"Kitchen\" at 127.0.0.1:5000 is not connected, so nothing was sent; wait for peerConnected before sending."),
            (.peerTooSlow(peer: p, queuedBytes: 40000000, limit: 33554432, grace: .seconds(10)),
             "the peer \"Kitchen\" at 127.0.0.1:5000 did not read what was sent to it: 40000000 bytes waited to be sent, over the 33554432-byte limit (PeerConfiguration.maximumQueuedOutboundBytes), for more than 10 s, so it was disconnected. Send less to it, or raise the limit."),
            (.peerTooSlow(peer: p, queuedBytes: 33554432, limit: 33554432, grace: .zero),
             "the peer \"Kitchen\" at 127.0.0.1:5000 did not read what was sent to it: 33554432 bytes waited to be sent, at the 33554432-byte limit (PeerConfiguration.maximumQueuedOutboundBytes) when a broadcast, which cannot wait, came for it, so it was disconnected. Send less to it, or raise the limit."),
            (.peerTooSlow(peer: p, queuedBytes: 2000000, budget: 134217728, grace: .seconds(10)),
             "the peer \"Kitchen\" at 127.0.0.1:5000 did not read what was sent to it: 2000000 bytes waited to be sent to it while all peers' send queues together were at the 134217728-byte budget (PeerConfiguration.maximumTotalQueuedOutboundBytes), for more than 10 s, so it was disconnected. Send less, or raise the budget."),
            (.requestTimedOut(type: "Question", peer: p, timeout: .milliseconds(1234)),
             "the peer \"Kitchen\" at 127.0.0.1:5000 did not answer the Question request within 1.234 s."),
            (.connectionClosed(peer: p),
             "The connection to the peer \"Kitchen\" at 127.0.0.1:5000 closed unexpectedly."),
            (.connectionFailed(peer: p, reason: "connection reset by peer"),
             "The connection to the peer \"Kitchen\" at 127.0.0.1:5000 failed: connection reset by peer."),
            (.remoteError(reason: "no handler for Question", peer: p),
             "the peer \"Kitchen\" at 127.0.0.1:5000 answered with an error: no handler for Question"),
            (.unexpectedReply(expected: "Answer", received: "Other", peer: p),
             "the peer \"Kitchen\" at 127.0.0.1:5000 answered with a Other message where a Answer was expected."),
            (.noPeerFound(serviceType: "listrctl", timeout: .seconds(5)),
             "No peer of service type \"listrctl\" connected within 5 s. Check that a peer is running and advertising that service type, and that avahi-daemon is running."),
            (.notRunning,
             "The transceiver is not running; call resume() before sending."),
            (.invalidKey(reason: "it is 3 bytes long"),
             "The pre-shared key cannot be used: it is 3 bytes long. Make a key with PeerKey.random() (32 random bytes) and give every peer the same one."),
            (.securitySetupFailed(reason: "bad cipher"),
             "Security cannot be set up: bad cipher."),
            (.keyMismatch(peer: p, ourKeyID: "ab12", detail: "the TLS handshake failed"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 does not share our pre-shared key: the TLS handshake failed. Our key id is ab12; give both sides the same key. The connection was closed before anything was read from it."),
            (.plaintextPeer(peer: p, security: ".preSharedKey"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 speaks plaintext, and this transceiver requires TLS (security .preSharedKey). Configure the same PeerConfiguration.security on both sides. The connection was closed before anything was read from it."),
            (.tlsPeer(peer: p),
             "The peer \"Kitchen\" at 127.0.0.1:5000 speaks TLS, and this transceiver has security .none (plaintext). Configure the same PeerConfiguration.security (and key) on both sides. The connection was closed before anything was read from it."),
            (.securityModeMismatch(peer: p, ours: ".certificates", detail: "no shared cipher"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 uses another security mode than ours (.certificates): no shared cipher. Configure the same PeerConfiguration.security on both sides."),
            (.securityHandshakeFailed(peer: p, reason: "alert 40"),
             "The TLS handshake with the peer \"Kitchen\" at 127.0.0.1:5000 failed: alert 40."),
            (.advertisedSecurityMismatch(service: "Kitchen", theirs: "psk:ab", ours: "none"),
             "The service \"Kitchen\" advertises security psk:ab, and ours is none, so it is not dialled. Give both sides the same PeerConfiguration.security and key."),
            (.admissionRefused(peer: p),
             "The admission hook refused the peer \"Kitchen\" at 127.0.0.1:5000; its connection was closed."),
            (.resourceSourceFailed(name: "photo.jpg", reason: "the file was deleted"),
             "The resource \"photo.jpg\" could not be read: the file was deleted; its transfer was cancelled."),
            (.resourceDigestMismatch(name: "photo.jpg", peer: p),
             "The resource \"photo.jpg\" from the peer \"Kitchen\" at 127.0.0.1:5000 arrived corrupted: its SHA-256 digest differs from the one the sender computed, so its bytes were discarded and no file was written under its name. Send it again."),
            (.resourceCancelled(name: "photo.jpg", peer: p, reason: "the sender cancelled it"),
             "The transfer of the resource \"photo.jpg\" with the peer \"Kitchen\" at 127.0.0.1:5000 was cancelled: the sender cancelled it."),
            (.resourceRefused(name: "photo.jpg", peer: p, reason: "no handler"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 refused the resource \"photo.jpg\": no handler."),
            (.featureNotSupported(feature: "groups", peer: p),
             "The peer \"Kitchen\" at 127.0.0.1:5000 does not take part in the \"groups\" protocol feature (its hello does not list it, as with an older PeerKit), so nothing was sent. Update that peer, or send it ordinary messages."),
            (.peerIDNotBound(peer: p, claimed: "C0FFEE" + String(repeating: "z", count: 80), fingerprint: "sha256:aa"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 claimed the peer ID \"C0FFEEzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz…\", but a peer ID must be the SHA-256 fingerprint of the peer\'s certificate public key, and its key\'s fingerprint is sha256:aa; a certificate of one peer cannot be used to pose as another. The connection was closed before any of its messages was dispatched."),
            (.certificateRefused(peer: p, ourFingerprint: "sha256:bb", detail: "alert 42"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 refused our certificate (alert 42): it does not trust our public key, fingerprint sha256:bb. Pin that fingerprint on the peer, or have our certificate signed by a CA it trusts. The connection was closed before anything was read from it."),
            (.certificateNotTrusted(peer: p, fingerprint: "sha256:cc", reason: "it is not pinned"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 presented a certificate whose public key has the fingerprint sha256:cc, which we do not trust: it is not pinned. If this peer is yours, pin that fingerprint (PeerTrust.pinned) or have its certificate signed by a CA in PeerTrust.certificateAuthorities. The connection was closed before anything was read from it."),
            (.certificateNotTrusted(peer: p, fingerprint: nil, reason: "it presented no certificate"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 is not trusted: it presented no certificate. In certificates mode every peer presents a certificate whose key is pinned (PeerTrust.pinned) or signed by a CA in PeerTrust.certificateAuthorities. The connection was closed before anything was read from it."),
            (.invalidIdentity(reason: "the key file is readable by others"),
             "The certificate identity or trust cannot be used: the key file is readable by others. Make an identity with PeerIdentity.generate() (or `peerkit identity create PATH`) and pin its fingerprint on the other peers."),
            (.invalidGroup("room\u{1}" + String(repeating: "g", count: 100), reason: "it is too long"),
             "The group \"room\\u{1}ggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg…\" cannot be used: it is too long."),
            (.peerExceededLimit(peer: p, reason: "it joined 65 groups"),
             "The peer \"Kitchen\" at 127.0.0.1:5000 went over a limit and was disconnected: it joined 65 groups."),
            (.alreadyRunning,
             "The transceiver is already running; run() it from one place only, or stop() it before running it again."),
        ]
    }()

    @Test("each code's error says its sentence, with its values in it, and keeps its code")
    func everySentence() {
        for (error, sentence) in Self.sentences {
            #expect(error.description == sentence, "\(error.code)")
        }
        let codes = Set(Self.sentences.map(\.0.code))
        #expect(codes.count == 43, "a code was added or lost: add its sentence to this list")
    }

    @Test("a sentence stays on one line whatever a peer put in its name, reason or type; the values keep their text")
    func sentencesEscapeControlCharacters() {
        let name = "Kitchen\n2026-12-06T10:00:00+0000 critical listrd: forged\r\u{1B}[2J\u{202E}"
        let errors: [PeerKitError] = [
            .peerNotConnected(peer: name),
            .connectionClosed(peer: name),
            .remoteError(reason: "no\nsuch item", peer: name),
            .requestTimedOut(type: "Ask\tMe", peer: name, timeout: .seconds(1), connectionDown: false),
            .unexpectedReply(expected: "Answer", received: "Other\n", peer: name),
            .handshakeFailed(reason: "its hello said\nhi", peer: name),
            .peerTooSlow(peer: name, queuedBytes: 2, limit: 1, grace: .seconds(10)),
        ]
        for error in errors {
            let controls = error.description.unicodeScalars.filter {
                [.control, .format, .lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory)
            }
            #expect(controls.isEmpty, "\(error.code): \(error.description)")
            #expect(error.description.contains("Kitchen\\n2026-12-06T10:00:00+0000 critical listrd: forged\\r\\u{1B}[2J\\u{202E}"), "\(error.code)")
            #expect(error.peer == name, "\(error.code)")
        }
    }

    @Test("the values a sentence names are read back by their accessors; other accessors are nil")
    func accessors() {
        let p = Self.peer
        let notTrusted = PeerKitError.certificateNotTrusted(peer: p, fingerprint: nil, reason: "no certificate")
        #expect(notTrusted.fingerprint == nil && notTrusted.reason == "no certificate" && notTrusted.peer == p)
        #expect(notTrusted != .certificateNotTrusted(peer: p, fingerprint: "sha256:cc", reason: "no certificate"))
        let frame = PeerKitError.frameTooLarge(length: 9, limit: 8, peer: p)
        #expect(frame.length == 9 && frame.limit == 8 && frame.peer == p && frame.reason == nil && frame.queuedBytes == nil)
        let mismatch = PeerKitError.advertisedSecurityMismatch(service: "s", theirs: "t", ours: "o")
        #expect(mismatch.service == "s" && mismatch.theirs == "t" && mismatch.ours == "o" && mismatch.peer == nil)
        #expect(PeerKitError.invalidDiscoveryInfo(key: "k", reason: "r").key == "k")
        #expect(PeerKitError.invalidConfiguration(property: "x", reason: "r").property == "x")
        #expect(PeerKitError.peerTimedOut(peer: p, silence: .seconds(3)).silence == .seconds(3))
    }

    @Test("a reason that is a sentence of its own ends the resource errors' sentences once, not with two periods")
    func reasonEndingInAPeriod() {
        let p = Self.peer
        let refused = PeerKitError.resourceRefused(name: "listr.replace", peer: p, reason: "the receiver's handler failed: Try again later.")
        #expect(refused.description == "The peer \"Kitchen\" at 127.0.0.1:5000 refused the resource \"listr.replace\": the receiver's handler failed: Try again later.")
        #expect(refused.reason == "the receiver's handler failed: Try again later.")
        let cancelled = PeerKitError.resourceCancelled(name: "photo.jpg", peer: p, reason: "the sender stopped.")
        #expect(cancelled.description == "The transfer of the resource \"photo.jpg\" with the peer \"Kitchen\" at 127.0.0.1:5000 was cancelled: the sender stopped.")
    }

    @Test("security refusals are the security codes, and the handshake and remote errors whose reason is one")
    func securityRefusals() {
        let p = Self.peer
        let refusals = Self.sentences.filter(\.0.isSecurityRefusal).map(\.0.code.description)
        #expect(Set(refusals) == ["keyMismatch", "plaintextPeer", "tlsPeer", "securityModeMismatch", "securityHandshakeFailed",
                                  "advertisedSecurityMismatch", "admissionRefused", "peerIDNotBound", "certificateRefused", "certificateNotTrusted"])
        #expect(PeerKitError.handshakeFailed(reason: "x " + SecurityModeSniffer.tlsRequiredReason, peer: p).isSecurityRefusal)
        #expect(PeerKitError.remoteError(reason: AdmissionGate.refusedReason, peer: p).isSecurityRefusal)
        #expect(PeerKitError.remoteError(reason: ConnectionStateMachine.unboundPeerIDReason, peer: p).isSecurityRefusal)
        #expect(!PeerKitError.handshakeFailed(reason: "no hello", peer: p).isSecurityRefusal)
    }
}
