import Clocks
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOSSL
import SwiftASN1
import Testing
@testable import PeerKit

@Suite("Certificate (mutual TLS 1.3) security between transceivers")
struct CertificateTests {
    @Test("two peers that pin each other's keys connect over TLS 1.3, exchange messages, and see each other's verified fingerprint as peer ID")
    func pinnedPair() async throws {
        let serviceType = randomServiceType()
        let a = try PeerIdentity.generate(name: "a"), b = try PeerIdentity.generate(name: "b")
        let server = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "server", identity: a, trust: try .pinned([b.fingerprint])))
        let inbox = Inbox<String>()
        server.receive(Note.self) { note in inbox.put(note.text) }
        try await server.start()
        defer { server.stop() }
        #expect(server.peerID == a.fingerprint)
        let client = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "client", identity: b, trust: try .pinned([a.fingerprint]), peers: [try endpoint(of: server)]))
        try await client.start()
        defer { client.stop() }
        let peer = try await client.waitForPeer(timeout: .seconds(20))
        #expect(peer.id == a.fingerprint)
        #expect(peer.fingerprint == a.fingerprint)
        try await client.send(Note(text: "signed"), to: [peer])
        #expect(try await inbox.take(1) == ["signed"])
        let serverSide = try await server.waitForPeer(timeout: .seconds(20))
        #expect(serverSide.fingerprint == b.fingerprint)
        #expect(serverSide.id == b.fingerprint)
    }

    @Test("a peer whose key is not pinned is refused during the handshake; the server names its fingerprint, the client learns its certificate was refused, and it is not redialled")
    func notPinned() async throws {
        let serviceType = randomServiceType()
        let a = try PeerIdentity.generate(name: "a"), b = try PeerIdentity.generate(name: "b")
        let stranger = try PeerIdentity.generate(name: "someone else")
        let server = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "server", identity: a, trust: try .pinned([stranger.fingerprint])))
        let serverLog = EventLog(server)
        let delivered = Inbox<String>()
        server.receive(Note.self) { note in delivered.put(note.text) }
        try await server.start()
        defer { server.stop() }
        // The client's timers (its back-off among them) run on a test clock, moved by hand below.
        let clientClock = TestClock()
        var clientConfiguration = certificateConfiguration(serviceType: serviceType, name: "client", identity: b, trust: try .pinned([a.fingerprint]), peers: [try endpoint(of: server)])
        clientConfiguration.clock = clientClock
        let client = PeerTransceiver(configuration: clientConfiguration)
        let clientEvents = client.events()
        try await client.start()
        defer { client.stop() }
        let clientError = try await nextError(clientEvents, "the client's refusal") { $0.isSecurityRefusal }
        #expect(clientError.description.contains("refused our certificate"), "\(clientError)")
        #expect(clientError.description.contains(b.fingerprint), "\(clientError)")
        let serverError = try await serverLog.waitForError("the server's refusal") { $0.code == .certificateNotTrusted }
        #expect(serverError.description.contains("presented a certificate whose public key has the fingerprint \(b.fingerprint), which we do not trust: that key is not pinned"), "\(serverError)")
        // No retry storm: with the client's clock moved past every back-off delay, no timer of it
        // is left (a redial would be one, and would arm a connect timeout).
        #expect(try await timeUntilNextTimerAfterAdvancing(client, clock: clientClock) == nil, "the client redials the peer that refused it")
        #expect(serverLog.errors.filter(\.isSecurityRefusal).count == 1, "\(serverLog.errors)")
        #expect(serverLog.connected.isEmpty)
        #expect(client.connectedPeers.isEmpty)
    }

    @Test("a client that does not trust the server's key refuses it and names the server's fingerprint")
    func serverNotTrusted() async throws {
        let serviceType = randomServiceType()
        let a = try PeerIdentity.generate(name: "a"), b = try PeerIdentity.generate(name: "b")
        let server = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "server", identity: a, trust: try .pinned([b.fingerprint])))
        let serverLog = EventLog(server)
        try await server.start()
        defer { server.stop() }
        let client = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "client", identity: b, trust: try .pinned([try PeerIdentity.generate().fingerprint]), peers: [try endpoint(of: server)]))
        let clientEvents = client.events()
        try await client.start()
        defer { client.stop() }
        let clientError = try await nextError(clientEvents, "the client's refusal") { $0.isSecurityRefusal }
        guard clientError.code == .certificateNotTrusted else {
            Issue.record("expected certificateNotTrusted, got \(clientError)")
            return
        }
        #expect(clientError.fingerprint == a.fingerprint)
        // The server learns that its certificate was refused: the connection ended in the TLS
        // handshake, so neither side ever reported the other connected.
        try await serverLog.waitForError("the server's refusal", where: \.isSecurityRefusal)
        #expect(serverLog.connected.isEmpty && client.connectedPeers.isEmpty)
    }

    @Test("a valid, pinned certificate of peer A used to claim peer B's ID is refused before any of its messages is dispatched, with a sentence", .timeLimit(.minutes(1)))
    func certificateOfAClaimingB() async throws {
        let serviceType = randomServiceType()
        let server = try PeerIdentity.generate(name: "server")
        let a = try PeerIdentity.generate(name: "a"), b = try PeerIdentity.generate(name: "b")
        var configuration = certificateConfiguration(serviceType: serviceType, name: "server", identity: server, trust: try .pinned([a.fingerprint, b.fingerprint]))
        // The raw peers answer no pings, and their steps run on the test's task: on a loaded
        // machine that task can wait seconds for a thread, which the heartbeat or the handshake
        // timeout must not take for a dead peer.
        configuration.peerTimeout = .seconds(60)
        configuration.handshakeTimeout = .seconds(60)
        let transceiver = PeerTransceiver(configuration: configuration)
        let log = EventLog(transceiver)
        let delivered = Inbox<String>()
        let dispatched = NIOLockedValueBox<[String]>([])
        transceiver.receive(Note.self) { note in
            dispatched.withLockedValue { $0.append(note.text) }
            delivered.put(note.text)
        }
        try await transceiver.start()
        defer { transceiver.stop() }

        let raw = try await TLSRawPeer(connectingTo: try endpoint(of: transceiver), identity: a)
        defer { raw.close() }
        try await raw.sayHello(serviceType: serviceType, peerID: b.fingerprint, name: "b (really a)", then: [#"{"type":"Note","payload":{"text":"as b"}}"#])
        // The transceiver closes the connection after its notice (bounded by the time limit).
        let notice = await raw.nextFrame()
        #expect(notice?.contains("peerkit.error") == true, "\(notice ?? "closed")")
        #expect(notice?.contains(ConnectionStateMachine.unboundPeerIDReason) == true, "\(notice ?? "closed")")
        #expect(notice?.contains(a.fingerprint) == true, "\(notice ?? "closed")")
        try await log.waitForError("the server's refusal", where: \.isSecurityRefusal)
        let error = try #require(log.errors.first { $0.isSecurityRefusal })
        #expect(error.description.contains("claimed the peer ID \"\(b.fingerprint)\""), "\(error)")
        #expect(error.description.contains("its key's fingerprint is \(a.fingerprint)"), "\(error)")
        #expect(log.connected.isEmpty, "\(log.all)")
        // The same peer with its own ID is accepted: the refusal was about the ID, not the key.
        let honest = try await TLSRawPeer(connectingTo: try endpoint(of: transceiver), identity: a)
        defer { honest.close() }
        try await honest.sayHello(serviceType: serviceType, peerID: a.fingerprint, name: "a", then: [#"{"type":"Note","payload":{"text":"as a"}}"#])
        #expect(try await delivered.take(1) == ["as a"])
        // The message sent after the lying hello, earlier, was never dispatched.
        #expect(dispatched.withLockedValue { $0 } == ["as a"])
    }

    @Test("a certificate-mode client meeting a plaintext server, and the reverse, are refused, and both sides say one of them speaks plaintext")
    func plaintextBothWays() async throws {
        for certificateServer in [false, true] {
            let serviceType = randomServiceType()
            let identity = try PeerIdentity.generate()
            let cert = PeerSecurity.certificates(identity, trust: try .pinned([try PeerIdentity.generate().fingerprint]))
            let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: certificateServer ? cert : .none))
            let serverEvents = server.events()
            let delivered = Inbox<String>()
            server.receive(Note.self) { note in delivered.put(note.text) }
            try await server.start()
            defer { server.stop() }
            let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: certificateServer ? .none : cert, peers: [try endpoint(of: server)]))
            let clientEvents = client.events()
            try await client.start()
            defer { client.stop() }
            let serverError = try await nextError(serverEvents, "the server's refusal") { $0.isSecurityRefusal }
            let clientError = try await nextError(clientEvents, "the client's refusal") { $0.isSecurityRefusal }
            if certificateServer {
                #expect(serverError.description.contains("speaks plaintext, and this transceiver requires TLS (security cert)"), "\(serverError)")
                #expect(clientError.description.contains("this peer requires TLS"), "\(clientError)")
            } else {
                #expect(clientError.description.contains("speaks plaintext, and this transceiver requires TLS (security cert)"), "\(clientError)")
                #expect(serverError.description.contains("speaks TLS, and this transceiver has security .none"), "\(serverError)")
            }
            #expect(server.connectedPeers.isEmpty && client.connectedPeers.isEmpty)
        }
    }

    @Test("a certificate-mode peer meeting a pre-shared-key peer, either way round, is refused with a sentence that names the modes")
    func certificateVersusPreSharedKey() async throws {
        for certificateServer in [false, true] {
            let serviceType = randomServiceType()
            let identity = try PeerIdentity.generate()
            let cert = PeerSecurity.certificates(identity, trust: try .pinned([try PeerIdentity.generate().fingerprint]))
            let psk = PeerSecurity.preSharedKey(.random())
            let server = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "server", security: certificateServer ? cert : psk))
            let serverLog = EventLog(server)
            try await server.start()
            defer { server.stop() }
            let client = PeerTransceiver(configuration: secureConfiguration(serviceType: serviceType, name: "client", security: certificateServer ? psk : cert, peers: [try endpoint(of: server)]))
            let clientEvents = client.events()
            try await client.start()
            defer { client.stop() }
            let clientError = try await nextError(clientEvents, "the client's refusal") { $0.isSecurityRefusal }
            guard clientError.code == .securityModeMismatch else {
                Issue.record("expected securityModeMismatch on the client, got \(clientError)")
                continue
            }
            #expect(clientError.description.contains("uses another security mode than ours (\(certificateServer ? "psk" : "cert (mutual TLS 1.3)"))"), "\(clientError)")
            try await serverLog.waitForError("the server's refusal", where: \.isSecurityRefusal)
            #expect(serverLog.connected.isEmpty && client.connectedPeers.isEmpty)
        }
    }

    @Test("trust by CA root accepts a peer whose certificate the CA signed and refuses a self-signed stranger")
    func certificateAuthority() async throws {
        let serviceType = randomServiceType()
        let authority = try TestAuthority()
        let serverIdentity = try authority.issue(name: "server")
        let member = try authority.issue(name: "member")
        let trust = try PeerTrust.certificateAuthorities([authority.certificate])
        let server = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "server", identity: serverIdentity, trust: trust))
        let serverLog = EventLog(server)
        let inbox = Inbox<String>()
        server.receive(Note.self) { note in inbox.put(note.text) }
        try await server.start()
        defer { server.stop() }

        let client = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "member", identity: member, trust: trust, peers: [try endpoint(of: server)]))
        try await client.start()
        let peer = try await client.waitForPeer(timeout: .seconds(20))
        #expect(peer.fingerprint == serverIdentity.fingerprint)
        try await client.send(Note(text: "from a member"), to: [peer])
        #expect(try await inbox.take(1) == ["from a member"])
        client.stop()

        let stranger = try PeerIdentity.generate(name: "stranger")
        let intruder = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "stranger", identity: stranger, trust: trust, peers: [try endpoint(of: server)]))
        let intruderEvents = intruder.events()
        try await intruder.start()
        defer { intruder.stop() }
        let refused = try await nextError(intruderEvents, "the stranger's refusal") { $0.isSecurityRefusal }
        #expect(refused.description.contains("refused our certificate"), "\(refused)")
        // The stranger's refusal is reported even if the member's own dial was cut off in a TLS
        // handshake moments before (a refusal of another kind, from the same address).
        let error = try await serverLog.waitForError("the server's refusal of the stranger") { $0.description.contains(stranger.fingerprint) }
        #expect(error.description.contains("its certificate is not signed by a trusted certificate authority"), "\(error)")
        #expect(serverLog.connected.count == 1, "\(serverLog.all)")
    }

    @Test("a refusal of one kind from a host does not hide one of another kind from it: a plaintext peer, then an untrusted certificate from the same address, are both reported")
    func refusalsOfTwoKindsFromOneHost() async throws {
        let serviceType = randomServiceType()
        let serverIdentity = try PeerIdentity.generate(name: "server")
        let server = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "server", identity: serverIdentity, trust: try .pinned([try PeerIdentity.generate().fingerprint])))
        let serverLog = EventLog(server)
        try await server.start()
        defer { server.stop() }
        // First a refusal of another kind from 127.0.0.1: a plaintext peer's hello. (Before the
        // fix, any refusal from the address silenced the next minute's; in the CI run that found
        // it, a member's dial cut off in the TLS handshake did.)
        let plaintext = try await RawPeer(connectingTo: try endpoint(of: server))
        defer { plaintext.close() }
        try await plaintext.sayHello(serviceType: serviceType)
        let first = try await serverLog.waitForError("the plaintext peer's refusal", where: \.isSecurityRefusal)
        #expect(first.code == .plaintextPeer, "\(first)")

        let stranger = try PeerIdentity.generate(name: "stranger")
        let intruder = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "stranger", identity: stranger, trust: try .pinned([serverIdentity.fingerprint]), peers: [try endpoint(of: server)]))
        try await intruder.start()
        defer { intruder.stop() }
        let refusal = try await serverLog.waitForError("the stranger's refusal") { $0.description.contains(stranger.fingerprint) }
        #expect(refusal.code == .certificateNotTrusted, "\(refusal)")
    }

    @Test("openssl s_client with -cert/-key completes a TLS 1.3 handshake with a certificate-mode transceiver that pins its key, and is refused without a certificate")
    func opensslClient() async throws {
        let serviceType = randomServiceType()
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let client = try PeerIdentity.generate(name: "openssl")
        let certificateFile = directory + "/client.pem", keyFile = directory + "/client.key"
        try client.write(certificateFile: certificateFile, keyFile: keyFile)
        handToToolUser([certificateFile, keyFile])
        let server = PeerTransceiver(configuration: certificateConfiguration(serviceType: serviceType, name: "server", identity: try PeerIdentity.generate(), trust: try .pinned([client.fingerprint])))
        try await server.start()
        defer { server.stop() }
        let port = try endpoint(of: server).port

        // The fingerprint is the standard SPKI SHA-256 that openssl computes.
        let spki = try await runTool(["sh", "-c", "openssl x509 -in \(certificateFile) -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -r"])
        #expect(spki.output.hasPrefix(client.fingerprint), "\(spki.output)")

        let result = try await runTool([
            // -ign_eof: keep reading after our (empty) input ends, until the transceiver closes
            // (after its handshake timeout, since openssl sends no hello).
            "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3", "-ign_eof",
            "-cert", certificateFile, "-key", keyFile,
        ])
        #expect(result.output.contains("TLSv1.3"), "\(result.output)")
        #expect(result.output.contains("Server certificate"), "\(result.output)")
        // The server's hello arrives inside TLS: the transceiver accepted the client's key.
        #expect(result.output.contains("peerkit.hello"), "\(result.output)")

        let anonymous = try await runTool(["openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3", "-ign_eof"])
        #expect(anonymous.output.contains("certificate required"), "\(anonymous.output)")
        #expect(!anonymous.output.contains("peerkit.hello"), "\(anonymous.output)")
    }
}
