import Foundation
import Testing
@testable import PeerKit

/// Strangers without the key (raw sockets from other loopback addresses) hold handshakes open,
/// as issue 30 measured: 64, then 2,000, stalled connections that send half a TLS ClientHello or
/// nothing, re-opened as fast as the listener closes them. A client with the key must still get
/// in at once, and the listener's log must say so once per episode, not once per connection.
@Suite("Handshake slots under attack from raw sockets")
struct HandshakeSlotAdversarialTests {
    /// How long a client with the key may take to connect while 64, or 2,000, stalled connections
    /// go on: the bound issue 30 sets. Connecting is a TCP connect, a TLS handshake and two
    /// hellos, a few ms on an idle machine (14 to 150 ms measured for 100 clients against 64
    /// stalled connections, in a debug build on 2 cores).
    ///
    /// Against 2,000, the client always gets a slot, but first it waits its turn in the kernel's
    /// accept queue, which is first come, first served: every stalled connection the listener
    /// closes is re-opened at once, behind it, so the client waits for about 2,000 accepts, at
    /// whatever rate the listener accepts and closes. Since a re-opened connection from one of
    /// the busiest addresses is closed at once instead of evicting another stalled handshake
    /// (``HandshakeSlots``), that is about 4,000 a second in a debug build on 2 cores: 361 to 642
    /// ms measured for 100 clients (675 to 922 ms for 20 with a build running beside it), against 1.3 to
    /// 2.1 s, and once 4.9 s, when every re-opened connection cost a whole connection set up and
    /// another torn down. A listener that refuses the client (as before issue 30) or loses its SYN
    /// in a full backlog (1 s, then 3 s, of retransmission) fails it.
    static let connectBound: Duration = .seconds(1)

    /// How many clients connect, one after the other, during each attack: 5, or
    /// `PEERKIT_STALLED_HANDSHAKE_CLIENTS` (`make stress` runs 100, a few minutes of attack).
    static let clients = ProcessInfo.processInfo.environment["PEERKIT_STALLED_HANDSHAKE_CLIENTS"].flatMap(Int.init) ?? 5

    /// A listener with a pre-shared key, logging into `log`.
    func listener(key: PeerKey, log: CapturedLog) async throws -> (PeerTransceiver, PeerEndpoint, String) {
        let serviceType = randomServiceType()
        var configuration = secureConfiguration(serviceType: serviceType, name: "listener", security: .preSharedKey(key))
        configuration.logger = log.logger
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        return (transceiver, try endpoint(of: transceiver), serviceType)
    }

    /// How long a new client with the key takes, from its start, to be connected to `endpoint`.
    func connectTime(serviceType: String, key: PeerKey, to endpoint: PeerEndpoint, attempt: Int) async throws -> Duration {
        let configuration = secureConfiguration(serviceType: serviceType, name: "client \(attempt)", security: .preSharedKey(key), peers: [endpoint])
        var client = configuration
        client.advertises = false
        let transceiver = PeerTransceiver(configuration: client)
        let events = transceiver.events()
        let started = ContinuousClock.now
        try await transceiver.start()
        defer { transceiver.stop() }
        _ = try await nextEvent(events, within: 20, "client \(attempt) to connect") { if case .peerConnected = $0 { true } else { false } }
        return ContinuousClock.now - started
    }

    /// Starts a listener, runs the attackers `make` builds for its port, connects ``clients`` clients
    /// one after the other while they run, and checks the clients' times and the listener's log.
    func attack(label: String, _ make: (Int) -> [StalledHandshakes]) async throws {
        let key = PeerKey.random()
        let log = CapturedLog()
        let (listener, endpoint, serviceType) = try await listener(key: key, log: log)
        defer { listener.stop() }
        let attackers = make(endpoint.port)
        let events = EventLog(listener)
        let attackStarted = ContinuousClock.now
        for attacker in attackers { attacker.start() }
        // Let the attack fill the slots: every stalled connection opened, the slots full.
        try await Task.sleep(for: .seconds(1))
        var times: [Duration] = []
        for attempt in 1...Self.clients {
            times.append(try await connectTime(serviceType: serviceType, key: key, to: endpoint, attempt: attempt))
        }
        let closedDuringClients = attackers.reduce(0) { $0 + $1.closedByListener }
        for attacker in attackers { await attacker.stop() }
        let elapsed = ContinuousClock.now - attackStarted
        let opened = attackers.reduce(0) { $0 + $1.opened }
        let summary = "\(label): clients connected in \(times.map { "\(Int($0 / .milliseconds(1))) ms" }.joined(separator: ", ")) while \(opened) stalled connections were opened and \(closedDuringClients) closed by the listener over \(elapsed)"
        print(summary)
        // The attack was real: every stalled connection was opened, and the listener had to close some.
        #expect(opened >= attackers.reduce(0) { $0 + $1.count }, "\(summary)")
        #expect((times.max() ?? .zero) < Self.connectBound, "\(summary); the bound is \(Self.connectBound)")

        // One line when an episode starts, then one per 10 s with counts: never one per
        // connection. (A TLS handshake that a stranger abandons, as the attackers do when they
        // stop, is a security refusal: logged once per address per minute, as before.)
        let lines = log.messages(atLeast: .notice)
        let tlsRefusals = lines.filter { $0.hasPrefix("The TLS handshake with") }
        let others = lines.filter { !$0.hasPrefix("The TLS handshake with") }
        // Up to three kinds of episode (evictions, refusals per address, failed handshakes).
        let allowed = 3 * (1 + Int(elapsed / .seconds(10)))
        #expect(!others.isEmpty, "the listener logged nothing about \(opened) stalled connections:\n\(lines.suffix(20).joined(separator: "\n"))")
        #expect(others.count <= allowed, "the listener logged \(others.count) lines at notice or above for \(opened) stalled connections in \(elapsed); at most \(allowed) episode lines were expected:\n\(others.prefix(30).joined(separator: "\n"))")
        // The clients dial from 127.0.0.1, which none of the attackers uses: a client connection
        // whose handshake ends unfinished is logged like any other address's, once.
        let addresses = Set(attackers.flatMap(\.sources)).count
        // An evicted handshake is not reported to the application; an abandoned one is, as it is
        // logged: once per address. (Connections that waited in the accept queue when the
        // attackers closed them end as refusals too; once counted 131 events when each was one.)
        let errors = events.errors.count
        #expect(errors <= addresses + 1, "the listener reported \(errors) errors to the application for \(opened) stalled connections from \(addresses) addresses; at most one per address was expected")
        let refusedFrom = tlsRefusals.compactMap { line in line.firstMatch(of: /peer at ([0-9.]+):/).map { String($0.1) } }
        #expect(Set(refusedFrom).count == tlsRefusals.count, "the listener logged an address's abandoned TLS handshakes more than once:\n\(tlsRefusals.prefix(30).joined(separator: "\n"))")
        #expect(tlsRefusals.count <= addresses + 1, "the listener logged \(tlsRefusals.count) abandoned TLS handshakes from \(addresses) attacking addresses and the clients' one; once per address was expected:\n\(tlsRefusals.prefix(30).joined(separator: "\n"))")
    }

    @Test("64 stalled handshakes from one address, re-opened as they are closed, do not keep a client with the key out")
    func sixtyFourStalled() async throws {
        try await attack(label: "64 stalled (half a ClientHello, from 127.0.0.2)") { port in
            [StalledHandshakes(port: port, count: 64, sources: ["127.0.0.2"], payload: StalledHandshakes.halfClientHello)]
        }
    }

    @Test("2,000 stalled handshakes from 16 addresses, half a ClientHello or nothing, re-opened as they are closed, do not keep a client with the key out")
    func twoThousandStalled() async throws {
        let sources = (2...17).map { "127.0.0.\($0)" }
        try await attack(label: "2,000 stalled (half a ClientHello or nothing, from 16 addresses)") { port in
            [
                StalledHandshakes(port: port, count: 1000, sources: sources, payload: StalledHandshakes.halfClientHello),
                StalledHandshakes(port: port, count: 1000, sources: sources, payload: []),
            ]
        }
    }

    @Test("a connection that sends nothing is closed after the pre-handshake timeout, not the handshake timeout")
    func silentConnectionClosedEarly() async throws {
        let serviceType = randomServiceType()
        var configuration = secureConfiguration(serviceType: serviceType, name: "listener", security: .preSharedKey(PeerKey.random()))
        configuration.handshakeTimeout = .seconds(30)
        configuration.preHandshakeTimeout = .milliseconds(500)
        let log = CapturedLog()
        configuration.logger = log.logger
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        defer { transceiver.stop() }
        let silent = try await RawPeer(connectingTo: try endpoint(of: transceiver))
        let connected = ContinuousClock.now
        while await silent.nextFrame(skipping: []) != nil {}
        let closedAfter = ContinuousClock.now - connected
        #expect(closedAfter < .seconds(15), "a connection that sent nothing was closed after \(closedAfter); the pre-handshake timeout is 0.5 s and the handshake timeout 30 s")
        #expect(await log.waitForMessage(containing: "sent nothing within 0.5 s"), "the listener did not say why it closed a silent connection:\n\(log.messages().joined(separator: "\n"))")
    }

}
