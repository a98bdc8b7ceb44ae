import NIOConcurrencyHelpers
import NIOCore

/// Runs ``PeerConfiguration/admission`` for each connection whose handshake completed, and holds
/// the messages that arrive on it meanwhile: delivered in order once the peer is admitted,
/// dropped with the connection when it is refused.
final class AdmissionGate: Sendable {
    /// The sentence sent to a refused peer; a peer that reads it does not redial.
    static let refusedReason = "the peer's admission hook refused this peer"

    private let admission: PeerAdmission?
    private let timeout: TimeAmount
    private let clock: PeerClock
    /// Where the hook runs: a child task of the session (none outlives it); nil runs it in a task
    /// of its own (tests of the gate alone).
    private let tasks: SessionTasks?
    /// Per connection still waiting for its verdict, the messages held; per refused connection
    /// (until it is closed), nil: what it still sends is dropped.
    private let held = NIOLockedValueBox<[ObjectIdentifier: [Envelope]?]>([:])

    init(admission: PeerAdmission?, timeout: TimeAmount, clock: PeerClock = .continuous, tasks: SessionTasks? = nil) {
        self.tasks = tasks
        self.admission = admission
        self.clock = clock
        self.timeout = timeout
    }

    /// Starts admission of `connection` and returns true (the caller waits for `admitted`; a
    /// refused connection is closed with ``ConnectionStateMachine/CloseReason/refused(_:notice:)``),
    /// or returns false when every peer is admitted (no hook).
    func begin(
        _ connection: PeerConnection, peer: Peer,
        admitted: @escaping @Sendable () -> Void,
        deliver: @escaping @Sendable ([Envelope]) -> Void
    ) -> Bool {
        guard let admission else { return false }
        let id = ObjectIdentifier(connection)
        held.withLockedValue { $0[id] = .some([]) }
        connection.channel.closeFuture.whenComplete { _ in
            let dropped = self.held.withLockedValue { $0.removeValue(forKey: id) ?? nil } ?? []
            for envelope in dropped { connection.inboundDropped(envelope) }
        }
        let timeout = timeout
        // The hook's time starts now, not when the task below starts.
        let sleep = clock.sleep(untilOffset: clock.offset + .nanoseconds(timeout.nanoseconds))
        let decide: SessionTasks.Job = {
            let verdict = await withTaskGroup(of: Bool?.self) { group in
                group.addTask { await admission(peer) }
                group.addTask {
                    try? await sleep.wait()
                    return nil
                }
                defer { group.cancelAll() }
                return await group.next() ?? nil
            }
            // On the channel's event loop, where messages arrive, so none overtakes the held ones.
            connection.channel.eventLoop.execute {
                let messages = self.held.withLockedValue { held -> [Envelope] in
                    defer { held[id] = verdict == true || !connection.channel.isActive ? nil : .some(nil) }
                    return (held[id] ?? nil) ?? []
                }
                if verdict == true {
                    // A connection that closed while the hook decided was already reported closed.
                    guard connection.channel.isActive else {
                        for envelope in messages { connection.inboundDropped(envelope) }
                        return
                    }
                    admitted()
                    if !messages.isEmpty { deliver(messages) }
                } else {
                    for envelope in messages { connection.inboundDropped(envelope) }
                    // Reported (and logged once per episode) when the connection has closed.
                    let error = PeerKitError.admissionRefused(peer: peer.description)
                    connection.requestClose(.refused(error, notice: "Closing the connection: " + Self.refusedReason + "."))
                }
            }
        }
        if let tasks {
            // The session stopped: its connections are closing, so the peer is not admitted.
            if !tasks.start(decide) { connection.requestClose(.stopped) }
        } else {
            Task { await decide() }
        }
        return true
    }

    /// Holds `envelope` when `connection` waits for its verdict, drops it when the connection was
    /// refused (it is closing), and returns false when neither: deliver it.
    func hold(_ envelope: Envelope, on connection: PeerConnection) -> Bool {
        guard admission != nil else { return false }
        let outcome = held.withLockedValue { held -> (held: Bool, dropped: Bool) in
            let id = ObjectIdentifier(connection)
            guard let entry = held[id] else { return (false, false) }
            guard var messages = entry else { return (true, true) }
            messages.append(envelope)
            held[id] = .some(messages)
            return (true, false)
        }
        if outcome.dropped { connection.inboundDropped(envelope) }
        return outcome.held
    }
}
