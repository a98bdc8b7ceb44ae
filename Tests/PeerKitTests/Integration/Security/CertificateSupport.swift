import Crypto
import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import X509
@testable import PeerKit

/// A test certificate authority: a P-256 root that issues peer certificates.
struct TestAuthority {
    let certificate: Certificate
    let key: Certificate.PrivateKey

    init(name: String = "PeerKit test CA") throws {
        let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let subject = try DistinguishedName { CommonName(name) }
        certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: key.publicKey,
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86400),
            issuer: subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
                SubjectKeyIdentifier(hash: key.publicKey)
            },
            issuerPrivateKey: key
        )
        self.key = key
    }

    /// A peer identity whose certificate this authority signed.
    func issue(name: String) throws -> PeerIdentity {
        let peerKey = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: peerKey.publicKey,
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86400),
            issuer: self.certificate.subject, subject: try DistinguishedName { CommonName(name) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
            },
            issuerPrivateKey: key
        )
        return try PeerIdentity(certificateChain: [certificate], privateKey: peerKey)
    }
}

/// A certificates-mode configuration for loopback tests.
func certificateConfiguration(serviceType: String, name: String, identity: PeerIdentity, trust: PeerTrust, peers: [PeerEndpoint] = []) -> PeerConfiguration {
    secureConfiguration(serviceType: serviceType, name: name, security: .certificates(identity, trust: trust), peers: peers)
}

/// A hand-driven TLS 1.3 client presenting `identity`'s certificate (and trusting any server),
/// that writes whatever frames a test wants and reads back the frames it receives.
final class TLSRawPeer {
    let channel: any Channel
    private var frames: AsyncStream<ByteBuffer>.AsyncIterator

    private typealias Collector = RawPeer.Collector

    init(connectingTo endpoint: PeerEndpoint, identity: PeerIdentity) async throws {
        let context = try NIOSSLContext(configuration: WireSecurity.certificateConfiguration(identity: identity, server: false))
        let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
        channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: { _, promise in promise.succeed(.certificateVerified) })
                    )
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                    try channel.pipeline.syncOperations.addHandler(Collector(continuation))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .get()
        frames = stream.makeAsyncIterator()
    }

    /// Writes one frame with `json` as its body.
    func send(_ json: String) async throws {
        try await channel.writeAndFlush(ByteBuffer.frame(json))
    }

    /// Sends a hello claiming `peerID` and, in the same write (so that the peer's refusal of the
    /// hello cannot close the connection between them), frames with the bodies `then`.
    func sayHello(serviceType: String, peerID: String, name: String = "raw", then bodies: [String] = []) async throws {
        var buffer = ConnectionStateMachine.ControlFrame.hello(Hello(peerID: peerID, name: name, serviceType: serviceType, discoveryInfo: nil)).encode()
        for body in bodies {
            var frame = ByteBuffer.frame(body)
            buffer.writeBuffer(&frame)
        }
        try await channel.writeAndFlush(buffer)
    }

    /// The next frame's body that is not a ping or a hello, or nil when the connection closed.
    func nextFrame() async -> String? {
        while let frame = await frames.next() {
            let text = String(buffer: frame)
            if !text.hasPrefix(#"{"type":"peerkit.ping""#) && !text.hasPrefix(#"{"type":"peerkit.hello""#) { return text }
        }
        return nil
    }

    func close() { channel.close(promise: nil) }
}

/// A fresh temporary directory, readable by the user tools run as (see `runTool`).
func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "peerkit-cert-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    chmod(path, 0o755)
    return path
}

/// Gives `paths` to the user nobody when the tests run as root, so that `runTool`'s tools
/// (which run as nobody) can read files of mode 0600.
func handToToolUser(_ paths: [String]) {
    guard getuid() == 0, let nobody = getpwnam("nobody") else { return }
    for path in paths { chown(path, nobody.pointee.pw_uid, nobody.pointee.pw_gid) }
}
