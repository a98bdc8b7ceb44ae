import CAvahi

/// Decides what an Avahi discovery session does when its client cannot be created or changes
/// state: when to (re)create the client, when to advertise and browse, what to report.
///
/// It makes no Avahi calls, so every decision is tested without a daemon. The facts it encodes:
/// - `avahi_client_new` fails at once with `AVAHI_ERR_NO_DAEMON` when the system bus or the daemon
///   cannot be reached, even with `AVAHI_CLIENT_NO_FAIL`: retry with a capped back-off.
/// - With `AVAHI_CLIENT_NO_FAIL` and the bus up, a daemon that is not running gives `CONNECTING`,
///   and `RUNNING` once it starts: just wait.
/// - A daemon that stops while the client runs gives `FAILURE` with `AVAHI_ERR_DISCONNECTED`, even
///   with `AVAHI_CLIENT_NO_FAIL`: the client is dead, free it and create a new one.
struct AvahiConnectionStateMachine: Sendable {
    /// The client states the machine reacts to (`AvahiClientState`, with the error for `FAILURE`).
    enum ClientState: Sendable, Hashable {
        case registering
        case running
        case collision
        case connecting
        case failure(code: Int32, message: String)
    }

    /// What the session must do, in order.
    enum Action: Sendable, Hashable {
        /// Free the current client, if any (with everything it owns), and create a new one after the delay.
        case connect(after: Duration)
        /// Register the advertisement and start browsing on the running client.
        case startServices
        /// The daemon is (re)registering its host name: withdraw the advertisement until `RUNNING`.
        case withdrawAdvertisement
        /// Report that discovery cannot work right now, with this reason.
        case reportFailure(reason: String)
        /// Report that discovery works again.
        case reportRecovery
    }

    /// Delays between attempts to reach the daemon: 0.25 s, doubling, at most 5 s.
    var retryBackoff = Backoff(initial: .milliseconds(250), maximum: .seconds(5), multiplier: 2, jitter: 0.1)

    /// Whether a failure was reported and no recovery since.
    private(set) var isFailing = false
    /// Failed attempts since the client last ran.
    private(set) var failedAttempts = 0

    /// The session starts: create the first client now.
    mutating func start() -> [Action] {
        [.connect(after: .zero)]
    }

    /// `avahi_client_new` returned no client.
    mutating func clientCreationFailed(code: Int32, message: String, random: Double = .random(in: 0..<1)) -> [Action] {
        let reason = code == Int32(AVAHI_ERR_NO_DAEMON)
            ? "avahi-daemon cannot be reached through the D-Bus system bus (\(message))"
            : "the Avahi client could not be created (\(message), Avahi error \(code))"
        return fail(reason) + [.connect(after: nextDelay(random: random))]
    }

    /// The client's state callback fired.
    mutating func clientChanged(to state: ClientState, random: Double = .random(in: 0..<1)) -> [Action] {
        switch state {
        case .running:
            failedAttempts = 0
            guard isFailing else { return [.startServices] }
            isFailing = false
            return [.startServices, .reportRecovery]
        case .registering, .collision:
            return [.withdrawAdvertisement]
        case .connecting:
            return fail("avahi-daemon is not running; PeerKit keeps waiting for it")
        case let .failure(code, message):
            if code == Int32(AVAHI_ERR_DISCONNECTED) {
                // The daemon went away; a new client waits for it (CONNECTING) when the bus is up.
                let delay = failedAttempts == 0 ? Duration.zero : nextDelay(random: random)
                failedAttempts += 1
                return fail("the connection to avahi-daemon was lost (\(message)); PeerKit reconnects when it is back")
                    + [.connect(after: delay)]
            }
            return fail("the Avahi client failed (\(message), Avahi error \(code))")
                + [.connect(after: nextDelay(random: random))]
        }
    }

    private mutating func fail(_ reason: String) -> [Action] {
        guard !isFailing else { return [] }
        isFailing = true
        return [.reportFailure(reason: reason)]
    }

    private mutating func nextDelay(random: Double) -> Duration {
        defer { failedAttempts += 1 }
        return retryBackoff.delay(attempt: failedAttempts, random: random)
    }
}
