import Foundation
import NIOCore
import Testing
@testable import PeerKit

@Suite("Pre-shared keys")
struct PeerKeyTests {
    @Test("a key file of 64 hex digits or 32 raw bytes reads back as the same key; other lengths are refused with a sentence")
    func keyFiles() throws {
        let key = PeerKey.random()
        #expect(try PeerKey(fileContents: Data((key.hexEncodedSecret + "\n").utf8)) == key)
        #expect(try PeerKey(fileContents: Data(key.bytes)) == key)
        #expect(throws: PeerKitError.self) { try PeerKey(fileContents: Data("abc".utf8)) }
        do {
            _ = try PeerKey(bytes: [1, 2, 3])
            Issue.record("a 3-byte key was accepted")
        } catch {
            #expect(error.description.contains("32 bytes long, and 3 were given"))
        }
    }

    @Test("two random keys differ, and neither the description nor the key id contains the secret")
    func keyIDIsPublic() {
        let a = PeerKey.random(), b = PeerKey.random()
        #expect(a != b)
        #expect(a.keyID != b.keyID)
        #expect(a.keyID.count == 16)
        #expect(!a.hexEncodedSecret.contains(a.keyID))
        #expect(!a.description.contains(a.hexEncodedSecret.prefix(16)))
        #expect(!PSKIdentity.identity(for: a).contains(a.hexEncodedSecret.prefix(8)))
    }

    @Test("the same passphrase derives the same key, another passphrase another one")
    func passphrase() throws {
        let a = try PeerKey(passphrase: "correct horse battery staple")
        let b = try PeerKey(passphrase: "correct horse battery staple")
        let c = try PeerKey(passphrase: "correct horse battery stapler")
        #expect(a == b)
        #expect(a != c)
        #expect(throws: PeerKitError.self) { try PeerKey(passphrase: "") }
    }

    @Test("a discovered service that advertises another mode or key id is refused by name; one without a sec key is not")
    func advertisedMismatch() throws {
        let key = PeerKey.random()
        let security = try WireSecurity(security: .preSharedKey(key), serviceType: "listrctl")
        func service(_ txt: [String: String]) -> DiscoveredService {
            DiscoveredService(key: "x", name: "fake listrd", peerID: "p", endpoints: [], txtRecord: txt)
        }
        let plaintext = try #require(security.refusal(of: service(["sec": "none"])))
        #expect(plaintext.description.contains("advertises security none, and ours is psk (key id \(key.keyID))"))
        #expect(security.refusal(of: service(["sec": "psk", "keyid": PeerKey.random().keyID])) != nil)
        #expect(security.refusal(of: service(["sec": "psk", "keyid": key.keyID])) == nil)
        #expect(security.refusal(of: service([:])) == nil)
        #expect(security.txtRecord == ["sec": "psk", "keyid": key.keyID])
    }

    @Test("a refused host is logged once per episode and kind of refusal, and again after a quiet minute")
    func refusalLogOncePerEpisode() {
        var log = WireSecurity.RefusalLog()
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let wrongKey = { (host: String) in WireSecurity.RefusalLog.Key(host: host, code: .keyMismatch) }
        var answers: [Bool] = []
        answers.append(log.shouldLog(wrongKey("10.0.0.5"), now: start))
        answers.append(log.shouldLog(wrongKey("10.0.0.5"), now: start + .seconds(30)))
        answers.append(log.shouldLog(wrongKey("10.0.0.6"), now: start + .seconds(30)))
        answers.append(log.shouldLog(wrongKey("10.0.0.5"), now: start + .seconds(80)))
        answers.append(log.shouldLog(wrongKey("10.0.0.5"), now: start + .seconds(150)))
        #expect(answers == [true, false, true, false, true])
        // Another kind of refusal from the same host is news; the same kind again is not.
        let stranger = WireSecurity.RefusalLog.Key(host: "10.0.0.5", code: .certificateNotTrusted)
        let strangerAnswers = [log.shouldLog(stranger, now: start + .seconds(151)), log.shouldLog(stranger, now: start + .seconds(152))]
        #expect(strangerAnswers == [true, false])
    }

    @Test("the refusals remembered are bounded: past the limit the oldest is forgotten")
    func refusalLogBounded() {
        var log = WireSecurity.RefusalLog()
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        for index in 0..<WireSecurity.RefusalLog.maximumEntries + 10 {
            _ = log.shouldLog(.init(host: "10.0.\(index / 256).\(index % 256)", code: .keyMismatch), now: start + .milliseconds(Int64(index)))
        }
        #expect(log.lastRefused.count == WireSecurity.RefusalLog.maximumEntries)
        // The first host was forgotten, so it is news again; the last is not.
        let last = WireSecurity.RefusalLog.maximumEntries + 9
        let answers = [
            log.shouldLog(.init(host: "10.0.0.0", code: .keyMismatch), now: start + .seconds(2)),
            log.shouldLog(.init(host: "10.0.\(last / 256).\(last % 256)", code: .keyMismatch), now: start + .seconds(2)),
        ]
        #expect(answers == [true, false])
    }
}
