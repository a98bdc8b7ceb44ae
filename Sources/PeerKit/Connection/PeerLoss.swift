/// What becomes of a peer once it has no connection left: its last one closed (the peer's state
/// machine said ``PeerStateMachine/Closed/disconnected``), or the winner of a tie-break never
/// arrived. Decided here, from the peer's session and why the connection ended, without I/O;
/// ``ConnectionManager`` carries it out (events, the resume window's timer, the redial).
enum PeerLoss: Equatable, Sendable {
    /// Feature resume: the peer is suspended, not disconnected. It stays connected for the user,
    /// what is sent to it waits in its session, and it is redialled. With `heardUsLate`, the
    /// redial waits ``ServiceDialer/Policy/lateHelloInterval``: the peer timed out our hello on a
    /// connection we dialled, and its own dials get through while ours would win the tie-break
    /// and time out again.
    case suspend(heardUsLate: Bool)
    /// The peer is disconnected: its session, if any, ends with the connection's error, and what
    /// waited on it fails. It is redialled unless `redial` is false: a security refusal (a wrong
    /// key, the admission hook) waits until the peer is discovered again.
    case disconnect(redial: Bool)

    /// The peer's last connection closed for `reason`. `direction` is the connection's (we
    /// dialled it: `.outbound`); `peerDialsUs` whether one of the peer's own connections ever
    /// completed here; `refused` whether the close was a security refusal.
    ///
    /// A peer with a live session is suspended when the connection died as a network fails (lost,
    /// reset, timed out), or when the peer timed out our hello before it resumed on the
    /// connection (``peerFailedBeforeResuming(_:session:)``). Anything else the peer or this side
    /// decided (a bye, a protocol violation, a limit, a refusal) disconnects it.
    static func connectionClosed<Waiter>(_ reason: ConnectionStateMachine.CloseReason, direction: TieBreak.Direction,
                                         session: PeerSession<Waiter>?, peerDialsUs: Bool, refused: Bool) -> PeerLoss {
        let failedBeforeResuming = peerFailedBeforeResuming(reason, session: session)
        guard let session, !session.isEnded, suspends(reason) || failedBeforeResuming else {
            return .disconnect(redial: !refused)
        }
        // Only for a peer that dials us: one that does not (discovery on our side only) is
        // redialled at once, since nobody else would dial.
        return .suspend(heardUsLate: failedBeforeResuming && direction == .outbound && peerDialsUs)
    }

    /// The winner of a tie-break did not arrive within the grace period. With a live session the
    /// peer is suspended, as when its connection dies: what waited for the winner stays in the
    /// session and goes out once the peer is back.
    static func winnerNeverArrived<Waiter>(session: PeerSession<Waiter>?) -> PeerLoss {
        if let session, !session.isEnded { return .suspend(heardUsLate: false) }
        return .disconnect(redial: true)
    }

    /// Whether a connection that ended for `reason` died as a network fails (the peer may come
    /// back with its session): lost without a bye, reset, or silent past the peer timeout.
    static func suspends(_ reason: ConnectionStateMachine.CloseReason) -> Bool {
        switch reason {
        case .connectionLost, .transportError, .failed(.timedOut): return true
        default: return false
        }
    }

    /// Whether the peer failed the connection because its handshake timed out (our hello reached
    /// it late, on a loaded machine) while ours completed, before its `peerkit.resume` arrived:
    /// the peer never counted the connection, and nothing of the session went over it either
    /// way, so the peer still holds the session as it was. It is suspended here too, not ended
    /// (ending it made the peer's next resume a protocol violation, and both sides started over,
    /// losing what was pending). Other failures the peer sends before its resume (its admission
    /// hook, a hello it refuses) are its decision, and end the session as before.
    static func peerFailedBeforeResuming<Waiter>(_ reason: ConnectionStateMachine.CloseReason, session: PeerSession<Waiter>?) -> Bool {
        guard case let .peerFailed(said) = reason, said.contains(ConnectionStateMachine.helloTimeoutReason),
              let session, case .resuming = session.phase else { return false }
        return true
    }
}
