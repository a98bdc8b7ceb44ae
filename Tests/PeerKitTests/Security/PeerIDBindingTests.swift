import NIOCore
import Testing
@testable import PeerKit

/// The certificates-mode rule that a peer's ID is its verified key's fingerprint, on the state
/// machine alone (no I/O).
@Suite("Peer ID bound to the certificate key")
struct PeerIDBindingTests {
    typealias Machine = ConnectionStateMachine

    let local = Hello(peerID: String(repeating: "a", count: 64), name: "alpha", serviceType: "chat", discoveryInfo: nil)
    let fingerprint = String(repeating: "b", count: 64)
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func machine(requires: Bool = true) -> Machine {
        var configuration = Machine.Configuration(localHello: local, heartbeatInterval: .milliseconds(500), peerTimeout: .milliseconds(2500), handshakeTimeout: .seconds(5))
        configuration.requiresAuthenticatedPeerID = requires
        var machine = Machine(configuration: configuration)
        _ = machine.activated(now: start)
        return machine
    }

    func hello(_ peerID: String) throws -> Envelope {
        var frame = Machine.ControlFrame.hello(Hello(peerID: peerID, name: "beta", serviceType: "chat", discoveryInfo: nil)).encode()
        _ = frame.readInteger(as: UInt32.self)
        return try EnvelopeParser.parse(frame)
    }

    func refusal(_ failure: Machine.Failure) -> Machine.Action {
        .close(sending: .error(reason: "Closing the connection: " + failure.reason + ".", replyTo: nil), mode: .halfClose, reason: .failed(failure))
    }

    @Test("a hello that claims the verified fingerprint establishes the connection")
    func matching() throws {
        var machine = machine()
        machine.peerAuthenticated(fingerprint: fingerprint)
        guard case .established = machine.frameReceived(try hello(fingerprint), now: start) else {
            Issue.record("not established")
            return
        }
        #expect(machine.authenticatedFingerprint == fingerprint)
    }

    @Test("a hello that claims another ID than the verified fingerprint is refused with a peerkit.error naming both, and nothing after it is delivered")
    func otherID() throws {
        var machine = machine()
        machine.peerAuthenticated(fingerprint: fingerprint)
        let claimed = String(repeating: "c", count: 64)
        let action = machine.frameReceived(try hello(claimed), now: start)
        #expect(action == refusal(.peerIDNotBound(claimed: claimed, fingerprint: fingerprint)))
        #expect(Machine.Failure.peerIDNotBound(claimed: claimed, fingerprint: fingerprint).reason.contains(Machine.unboundPeerIDReason))
        #expect(machine.frameReceived(try EnvelopeParser.parse(ByteBuffer(string: #"{"type":"Note","payload":{}}"#)), now: start) == .none)
        let error = try #require(Machine.CloseReason.failed(.peerIDNotBound(claimed: claimed, fingerprint: fingerprint)).error(peer: "the chat peer at 127.0.0.1:1"))
        #expect(error.isSecurityRefusal)
        #expect(error.description.hasPrefix("The chat peer at 127.0.0.1:1 claimed the peer ID \"\(claimed)\""), "\(error)")
    }

    @Test("in certificates mode a hello before any verified certificate is refused")
    func noCertificate() throws {
        var machine = machine()
        #expect(machine.frameReceived(try hello(fingerprint), now: start) == refusal(.peerIDNotBound(claimed: fingerprint, fingerprint: nil)))
    }

    @Test("the peer's refusal notice, read by the refused side, counts as a security refusal (not redialled)")
    func noticeIsRefusal() {
        let reason = "Closing the connection: " + Machine.Failure.peerIDNotBound(claimed: "x", fingerprint: fingerprint).reason + "."
        #expect(PeerKitError.remoteError(reason: reason, peer: "p").isSecurityRefusal)
        #expect(PeerKitError.handshakeFailed(reason: "the peer refused the connection: " + reason, peer: "p").isSecurityRefusal)
    }

    @Test("outside certificates mode any peer ID is accepted")
    func otherModes() throws {
        var machine = machine(requires: false)
        guard case .established = machine.frameReceived(try hello("any-id"), now: start) else {
            Issue.record("not established")
            return
        }
    }
}
