import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import PeerKit

/// A random service type, so that tests running at the same time never see each other.
func randomServiceType() -> String {
    let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
    return "t" + String((0..<10).map { _ in alphabet.randomElement() ?? "x" })
}

/// A configuration for loopback tests: listens on 127.0.0.1, dials `peers` (no Avahi).
func loopbackConfiguration(serviceType: String, name: String, peers: [PeerEndpoint] = []) -> PeerConfiguration {
    var configuration = PeerConfiguration(serviceType: serviceType)
    configuration.peerName = name
    configuration.listenHost = "127.0.0.1"
    configuration.discovery = peers.isEmpty ? .none : .staticPeers(peers)
    // With every suite running at once on 2 cores, a test's raw peer (or a transceiver's dial)
    // can take more than the default 2 s between connecting and its first bytes; tests of that
    // timeout set it themselves.
    configuration.preHandshakeTimeout = .seconds(10)
    return configuration
}

/// ``loopbackConfiguration(serviceType:name:peers:)`` for a transceiver that a test's raw peer
/// talks to. A raw peer answers no pings, and its steps run on the test's task, which a loaded
/// machine (every suite in parallel on two cores) can keep waiting for seconds: neither the
/// heartbeat nor the handshake timeout may take the peer meanwhile.
func rawPeerConfiguration(serviceType: String, name: String) -> PeerConfiguration {
    var configuration = loopbackConfiguration(serviceType: serviceType, name: name)
    configuration.heartbeatInterval = .seconds(10)
    configuration.peerTimeout = .seconds(60)
    configuration.handshakeTimeout = .seconds(60)
    return configuration
}

/// A request's timeout in tests whose claim is not about time. In the parallel run (every suite
/// at once on 2 cores) a request's reply once took longer than the default 5 s: dozens of tests
/// finished in the same instant after the process had been held up.
let generousRequestTimeout: Duration = .seconds(30)

/// The endpoint a started transceiver listens on.
func endpoint(of transceiver: PeerTransceiver) throws -> PeerEndpoint {
    PeerEndpoint(host: "127.0.0.1", port: try #require(transceiver.listeningPort))
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "Timed out waiting for \(what)." }
}

/// Runs `body`, failing with ``TimedOut`` after `seconds`.
func within<T: Sendable>(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        guard let value = try await group.next() else { throw TimedOut(what: what) }
        return value
    }
}

/// The first event from `events` matching `predicate`, within `seconds` (generous: machines are slow and busy).
func nextEvent(
    _ events: AsyncStream<PeerEvent>,
    within seconds: Double = 20,
    _ what: String,
    where predicate: @escaping @Sendable (PeerEvent) -> Bool
) async throws -> PeerEvent {
    try await within(seconds, what) {
        for await event in events where predicate(event) {
            return event
        }
        throw TimedOut(what: what + " (the event stream ended)")
    }
}

/// Collects values handed to it from handlers, and lets a test wait for a count.
final class Inbox<Value: Sendable>: Sendable {
    private let stream: AsyncStream<Value>
    private let continuation: AsyncStream<Value>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Value.self)
    }

    func put(_ value: Value) { continuation.yield(value) }

    /// The next `count` values, within `seconds`.
    func take(_ count: Int, within seconds: Double = 20) async throws -> [Value] {
        let stream = stream
        return try await PeerKitTests.within(seconds, "\(count) values") {
            var values: [Value] = []
            for await value in stream {
                values.append(value)
                if values.count == count { break }
            }
            return values
        }
    }
}

extension ByteBuffer {
    /// A buffer holding `string`'s UTF-8 bytes.
    init(text string: String) {
        self.init(string: string)
    }

    /// The frame around `json`: a 4-byte big-endian length, then the bytes.
    static func frame(_ json: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(json.utf8.count))
        buffer.writeString(json)
        return buffer
    }
}

/// A discovery backend the test drives by hand: it reports whatever the test injects.
final class ManualDiscovery: PeerDiscovery {
    private let handler = NIOLockedValueBox<(@Sendable (DiscoveryEvent) -> Void)?>(nil)
    private let requests = NIOLockedValueBox<[DiscoveryRequest]>([])

    func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        requests.withLockedValue { $0.append(request) }
        handler.withLockedValue { $0 = onEvent }
    }

    func stop() {
        handler.withLockedValue { $0 = nil }
    }

    /// The requests the transceiver started this backend with.
    var startRequests: [DiscoveryRequest] { requests.withLockedValue { $0 } }

    func inject(_ event: DiscoveryEvent) {
        handler.withLockedValue { $0 }?(event)
    }

    /// Reports `transceiver` as found, as Avahi would (with its peer ID in the TXT record).
    func found(_ transceiver: PeerTransceiver, key: String? = nil) throws {
        inject(.found(DiscoveredService(
            key: key ?? transceiver.configuration.peerName,
            name: transceiver.configuration.peerName,
            peerID: transceiver.peerID,
            endpoints: [try endpoint(of: transceiver)],
            txtRecord: ["peerid": transceiver.peerID, "proto": "1"]
        )))
    }
}

/// A loopback configuration whose discovery is `discovery`.
func manualConfiguration(serviceType: String, name: String, discovery: ManualDiscovery) -> PeerConfiguration {
    var configuration = loopbackConfiguration(serviceType: serviceType, name: name)
    configuration.discovery = .custom { discovery }
    return configuration
}

/// Two started transceivers, each with a ``ManualDiscovery`` and a one-thread event loop group of
/// its own, find each other while both loops are held, so both dial before either handshake can
/// complete: the tie-break must happen.
func findEachOtherAtOnce(
    _ first: (transceiver: PeerTransceiver, discovery: ManualDiscovery, group: any EventLoopGroup),
    _ second: (transceiver: PeerTransceiver, discovery: ManualDiscovery, group: any EventLoopGroup)
) throws {
    let gate = DispatchSemaphore(value: 0)
    for group in [first.group, second.group] {
        group.next().execute { gate.wait() }
    }
    defer {
        gate.signal()
        gate.signal()
    }
    try first.discovery.found(second.transceiver)
    try second.discovery.found(first.transceiver)
}

/// Runs `body`, then shuts `transceivers` down and, only once they have (``PeerTransceiver/shutdown()``
/// waits for their byes and closes), the event loop groups of the test's own they run on, whether
/// `body` threw or not. `stop()` followed at once by the groups' shutdown left the background stop
/// scheduling on loops that had shut down, which NIO reports ("Cannot schedule tasks on an
/// EventLoop that has already shut down") and will one day make a crash.
func withOwnLoops<T>(_ groups: [MultiThreadedEventLoopGroup], running transceivers: [PeerTransceiver], _ body: () async throws -> T) async throws -> T {
    func end() async throws {
        for transceiver in transceivers { await transceiver.shutdown() }
        for group in groups { try await group.shutdownGracefully() }
    }
    let value: T
    do {
        value = try await body()
    } catch {
        try? await end()
        throw error
    }
    try await end()
    return value
}
