/// How one discovered service is dialled over time: whether a dial is under way, how many
/// attempts in a row failed, and when it is dialled again after a failure or a lost connection.
///
///     idle ──startDial()──▶ dialling ──reached()──▶ idle (reached: later redials are capped)
///                          dialling ──failed()──▶ backing off (attempt n) ──retryFired()──▶ idle, then startDial()
///     idle ──connectionLost()──▶ backing off (attempt 0; longer when the peer heard our hello late)
///     backing off ──advertised()──▶ idle (attempt 0: the driver dials at once)
///
/// One dial (every endpoint of the service, in the manner of Happy Eyeballs) is a ``DialPlan``;
/// this is what happens between dials. A value type with no I/O, no clock and no randomness: the
/// driver passes the random fraction the back-off's jitter uses, arms the redial timer when a
/// method returns a ``Redial`` and hands the timer back (``retryArmed(_:arming:)``), and cancels
/// the timers that methods return. `Timer` is the timer's handle (``PeerTimer`` in the manager).
struct ServiceDialer<Timer> {
    /// The delays between attempts.
    struct Policy {
        /// The back-off between failed attempts (``PeerConfiguration/reconnectBackoff``).
        var backoff: Backoff
        /// The longest wait between redials of a service that was reached once: a peer on a link
        /// that went down for a while is back this soon after the link returns, instead of after
        /// the back-off's maximum.
        var reachedCap: Duration
        /// The longest wait between redials of a peer whose session is suspended (feature resume):
        /// its user's sends wait, so it is redialled without back-off until its window ends.
        var suspendedInterval: Duration
        /// The wait before redialling a peer that closed a connection we dialled because our hello
        /// reached it too late: long enough for the peer's own redial to reach us and to wait for
        /// our hello. The peer hears us late, so only its dials, which wait longer for our hello
        /// than an inbound handshake does, can succeed; a dial of ours meanwhile would win the
        /// tie-break against its dial (when our peer ID is the smaller) and time out again.
        var lateHelloInterval: Duration
    }

    /// A redial to arm: after `delay`, call ``startDial()``. `arming` names this arming, so that
    /// a timer armed for an earlier one is told apart (``retryArmed(_:arming:)``).
    struct Redial: Equatable {
        var delay: Duration
        var arming: Int
    }

    /// Failed attempts since the service was last reached (or advertised anew).
    private(set) var attempt = 0
    /// Whether a connection to the service ever completed its handshake.
    private(set) var wasReached = false
    /// Whether a dial is under way: from ``startDial()`` until the handshake completed
    /// (``reached()``) or the dial failed (``failed(policy:random:peerSuspended:arming:)``).
    private(set) var isDialling = false
    /// The redial timer, once armed.
    private(set) var retry: Timer?
    /// The arming of the redial decided and not yet armed (the driver arms timers outside its lock).
    private var retryArming: Int?

    init() {}

    /// Whether a redial is armed or being armed.
    var isRetrying: Bool { retry != nil || retryArming != nil }

    /// The driver starts a dial now, unless one is under way: returns whether to start it, and
    /// the redial timer to cancel (the dial replaces it).
    mutating func startDial() -> (start: Bool, cancel: Timer?) {
        guard !isDialling else { return (false, nil) }
        isDialling = true
        return (true, cancelRetry())
    }

    /// The service was advertised anew. While backing off, that ends the back-off: the count
    /// starts over, and the driver dials at once. Returns the redial timer to cancel.
    mutating func advertised() -> Timer? {
        guard isRetrying else { return nil }
        attempt = 0
        return cancelRetry()
    }

    /// The dial failed (every endpoint, or the connection closed before its handshake completed).
    /// Returns which failed attempt this was (0: the first of an episode, which is worth a log
    /// line) and the redial to arm: the back-off's delay for it, capped for a service reached
    /// before, and for a suspended peer. `random` is the jitter's fraction, in 0..<1.
    mutating func failed(policy: Policy, random: Double, peerSuspended: Bool, arming: Int) -> (attempt: Int, redial: Redial) {
        isDialling = false
        var delay = policy.backoff.delay(attempt: attempt, random: random)
        if wasReached { delay = min(delay, policy.reachedCap) }
        if peerSuspended { delay = min(delay, policy.suspendedInterval) }
        let failed = attempt
        attempt += 1
        retryArming = arming
        return (failed, Redial(delay: delay, arming: arming))
    }

    /// A connection dialled for the service completed its handshake. Returns how many attempts
    /// had failed before it (0: none, nothing to report).
    mutating func reached() -> Int {
        let failed = attempt
        isDialling = false
        attempt = 0
        wasReached = true
        return failed
    }

    /// The service's peer lost its connection: redial it after the back-off's first delay, unless
    /// a dial or a redial is under way already. Returns the redial to arm. `heardUsLate`: the peer
    /// closed a connection we dialled because our hello reached it after its handshake timeout;
    /// the redial then waits ``Policy/lateHelloInterval``, so that the peer's dial comes first.
    mutating func connectionLost(policy: Policy, random: Double, arming: Int, heardUsLate: Bool = false) -> Redial? {
        guard !isDialling, !isRetrying else { return nil }
        attempt = 0
        retryArming = arming
        let delay = policy.backoff.delay(attempt: 0, random: random)
        return Redial(delay: heardUsLate ? max(delay, policy.lateHelloInterval) : delay, arming: arming)
    }

    /// The redial's timer fired: the redial is no longer armed, whether or not the driver dials
    /// now (the peer may be connected another way: it dialled us meanwhile). Without this, a
    /// fired redial whose dial did not start would count as armed for good, and the next lost
    /// connection would not be redialled (``connectionLost(policy:random:arming:)`` leaves a
    /// service that retries alone).
    mutating func retryFired() {
        retry = nil
        retryArming = nil
    }

    /// The driver armed `timer` for the redial `arming`. Returns false when that redial was
    /// cancelled or replaced meanwhile: the driver then cancels the timer.
    mutating func retryArmed(_ timer: Timer, arming: Int) -> Bool {
        guard retryArming == arming else { return false }
        retry = timer
        retryArming = nil
        return true
    }

    /// Forgets the redial; returns its timer, if armed, to cancel.
    mutating func cancelRetry() -> Timer? {
        defer {
            retry = nil
            retryArming = nil
        }
        return retry
    }
}

extension ServiceDialer: Sendable where Timer: Sendable {}
extension ServiceDialer.Policy: Sendable {}
