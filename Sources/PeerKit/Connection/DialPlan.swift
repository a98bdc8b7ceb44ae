/// One dial of one discovered service across all of its endpoints, in the manner of Happy
/// Eyeballs (RFC 8305): the endpoints are ordered IPv6 first, then alternating families (§4); a
/// new attempt starts every ``attemptDelay`` or as soon as the previous one fails (§5); endpoints
/// that discovery reports later join the running dial (§4); the first connection to connect wins
/// and the attempts still under way are cancelled (§5).
///
/// While discovery is still resolving the service elsewhere (``lingers``: avahi-daemon resolves
/// IPv4 and IPv6 one after the other), the dial fails only when every endpoint failed and no
/// attempt was started within the last ``attemptDelay``, so that an address resolved a moment
/// after the first still joins instead of the service being reported unreachable while it can be
/// reached. Otherwise it fails as soon as every endpoint failed.
///
/// A value type without I/O, so it is tested with plain values: the owner performs the returned
/// ``Action``s (connect, arm the timer, close attempts) and reports back what happened.
///
/// ```
///   start ──► connect(e1), armTimer ──► timerFired ──► connect(e2), armTimer ──► …
///                  │ attemptFailed(e1) ──► connect(e2), armTimer (at once)
///                  │ attemptConnected(e2) ──► cancel([e1, e3]) ── connected
///                  └ all failed and the timer fired ──► failed([reasons])
/// ```
struct DialPlan: Sendable {
    /// What the owner does next.
    enum Action: Sendable, Hashable {
        /// Start connecting to this endpoint.
        case connect(PeerEndpoint)
        /// Arm the connection-attempt timer for this long, replacing an armed one; call
        /// ``timerFired()`` when it fires.
        case armTimer(Duration)
        /// Close the attempts to these endpoints, which are still connecting or connected too
        /// late: another one won.
        case cancel([PeerEndpoint])
        /// Every endpoint failed; one reason per endpoint, in the order they were tried (a
        /// sentence fragment each, such as "connecting to 10.0.0.2:7000 failed: …").
        case failed([String])
    }

    /// Where the dial is.
    enum Phase: Sendable, Hashable {
        /// Attempts are being made.
        case running
        /// This endpoint's connection won.
        case connected(PeerEndpoint)
        /// Every endpoint failed.
        case failed
    }

    /// RFC 8305's "Connection Attempt Delay": how long an attempt has alone before the next one
    /// starts beside it. 250 ms, the RFC's recommended value: on a LAN a connection either
    /// completes or is refused within a few milliseconds, so a longer wait only means an address
    /// that does not answer (a stale one, a family the peer does not listen on).
    static let defaultAttemptDelay: Duration = .milliseconds(250)

    /// The delay between the starts of two attempts.
    let attemptDelay: Duration
    private(set) var phase = Phase.running
    /// Endpoints not tried yet, in the order they will be.
    private(set) var queue: [PeerEndpoint] = []
    /// Attempts under way, oldest first.
    private(set) var inFlight: [PeerEndpoint] = []
    /// Every endpoint ever queued (so an endpoint reported again is not tried twice).
    private var known: Set<PeerEndpoint> = []
    /// Why each failed endpoint failed, in order.
    private var failures: [String] = []
    /// How many of them refused the connection (TCP's `ECONNREFUSED`): the host answered, and
    /// nothing listens at that port.
    private var refusals = 0
    /// Whether the attempt timer is armed (it was armed when the last attempt started).
    private var timerArmed = false
    /// The endpoint of the last attempt started: endpoints that join later alternate from its family.
    private var lastStarted: PeerEndpoint?
    /// Whether more endpoints may still arrive (``DiscoveredService/isResolving``): when every
    /// endpoint failed, the dial then waits for the attempt timer before it fails.
    private(set) var lingers: Bool

    /// A dial of `endpoints` (in any order; duplicates are ignored), waiting briefly for more when
    /// `lingers` (discovery is still resolving). Call ``start()``.
    init(endpoints: [PeerEndpoint], lingers: Bool = false, attemptDelay: Duration = DialPlan.defaultAttemptDelay) {
        self.attemptDelay = attemptDelay
        self.lingers = lingers
        enqueue(endpoints)
    }

    /// Why the endpoints that failed so far failed, in the order they failed.
    var failureReasons: [String] { failures }

    /// Whether the dial failed with every endpoint refusing the connection: each host answered
    /// that nothing listens at the peer's port. A process that ended leaves exactly that; a link
    /// that is down, an address that moved or a peer too busy to accept never refuses (their
    /// attempts time out, or fail as unreachable). False while the dial runs, and for a dial
    /// that had no endpoint.
    var everyEndpointRefused: Bool {
        phase == .failed && !failures.isEmpty && refusals == failures.count
    }

    /// Starts the first attempt. With no endpoint at all, the dial fails at once.
    mutating func start() -> [Action] {
        guard phase == .running else { return [] }
        return startNext() ?? fail()
    }

    /// The attempt timer fired: start the next attempt beside those under way, or, when every
    /// endpoint was tried and failed, fail.
    mutating func timerFired() -> [Action] {
        guard phase == .running, timerArmed else { return [] }
        timerArmed = false
        if let started = startNext() { return started }
        return inFlight.isEmpty ? fail() : []
    }

    /// The attempt to `endpoint` failed (refused, unreachable, timed out); `refused` when the
    /// host refused the connection (``everyEndpointRefused``).
    mutating func attemptFailed(_ endpoint: PeerEndpoint, reason: String, refused: Bool = false) -> [Action] {
        guard phase == .running, let index = inFlight.firstIndex(of: endpoint) else { return [] }
        inFlight.remove(at: index)
        failures.append(reason)
        if refused { refusals += 1 }
        // The next attempt starts at once rather than when the timer fires (RFC 8305 §5).
        if let started = startNext() { return started }
        // Nothing left to try: wait for the attempts under way and, while discovery is still
        // resolving, for addresses that arrive before the timer fires.
        return inFlight.isEmpty && !(timerArmed && lingers) ? fail() : []
    }

    /// The attempt to `endpoint` connected. The first one wins and the others are cancelled; a
    /// later one (two connected at once) is itself cancelled.
    mutating func attemptConnected(_ endpoint: PeerEndpoint) -> [Action] {
        guard phase == .running, let index = inFlight.firstIndex(of: endpoint) else {
            return [.cancel([endpoint])]
        }
        inFlight.remove(at: index)
        phase = .connected(endpoint)
        timerArmed = false
        queue = []
        defer { inFlight = [] }
        return inFlight.isEmpty ? [] : [.cancel(inFlight)]
    }

    /// Discovery reported the service's endpoints again (a second resolution, a new address):
    /// the new ones join the dial, and `stillResolving` says whether more may follow. When no
    /// attempt started within the last ``attemptDelay``, the first new one starts at once; when
    /// none is new, nothing is under way and nothing more is expected, the dial fails.
    mutating func add(_ endpoints: [PeerEndpoint], stillResolving: Bool = false) -> [Action] {
        guard phase == .running else { return [] }
        lingers = stillResolving
        enqueue(endpoints)
        if !timerArmed, let started = startNext() { return started }
        return queue.isEmpty && inFlight.isEmpty && !lingers ? fail() : []
    }

    // MARK: - Private

    private mutating func startNext() -> [Action]? {
        guard !queue.isEmpty else { return nil }
        let endpoint = queue.removeFirst()
        inFlight.append(endpoint)
        lastStarted = endpoint
        timerArmed = true
        return [.connect(endpoint), .armTimer(attemptDelay)]
    }

    private mutating func fail() -> [Action] {
        phase = .failed
        timerArmed = false
        return [.failed(failures.isEmpty ? ["it advertises no address"] : failures)]
    }

    /// Adds the endpoints not seen before and orders what is not tried yet (RFC 8305 §4): IPv6
    /// first, then the families alternate; within a family, the order discovery gave.
    private mutating func enqueue(_ endpoints: [PeerEndpoint]) {
        var added = false
        for endpoint in endpoints where known.insert(endpoint).inserted {
            queue.append(endpoint)
            added = true
        }
        guard added else { return }
        queue = Self.interleaved(queue, lastTried: lastStarted)
    }

    /// `endpoints` with the families alternating, IPv6 first; when an attempt was already
    /// started, the family after that attempt's comes first.
    static func interleaved(_ endpoints: [PeerEndpoint], lastTried: PeerEndpoint? = nil) -> [PeerEndpoint] {
        var v6 = endpoints.filter(\.isIPv6)[...]
        var v4 = endpoints.filter { !$0.isIPv6 }[...]
        var result: [PeerEndpoint] = []
        var takeV6 = lastTried.map { !$0.isIPv6 } ?? true
        while !v6.isEmpty || !v4.isEmpty {
            if takeV6, let next = v6.popFirst() {
                result.append(next)
            } else if let next = v4.popFirst() {
                result.append(next)
            } else if let next = v6.popFirst() {
                result.append(next)
            }
            takeV6.toggle()
        }
        return result
    }
}

extension PeerEndpoint {
    /// Whether the host is an IPv6 address literal (possibly with a zone, `fe80::1%eth0`).
    var isIPv6: Bool { host.contains(":") }
}
