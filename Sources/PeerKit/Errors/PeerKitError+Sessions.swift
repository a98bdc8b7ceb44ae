// Codes about resumable sessions (feature `resume`): a peer whose link dropped is suspended, not
// disconnected, for PeerConfiguration.sessionResumeWindow; these say why a session could not go on.
// To add a code, see "Adding a code" in PeerKitError.swift.

extension PeerKitError.Code {
    /// What was kept for a suspended peer (or not yet acknowledged by it) reached
    /// ``PeerConfiguration/maximumUnacknowledgedBytes``, so nothing more was taken.
    public static let sessionBufferFull = Self("sessionBufferFull")
    /// A peer's link stayed down for longer than ``PeerConfiguration/sessionResumeWindow``: its
    /// session ended, and what was pending for it failed.
    public static let sessionExpired = Self("sessionExpired")
    /// A peer came back as a new process (a new session), so what was pending for its previous
    /// run failed.
    public static let peerRestarted = Self("peerRestarted")
    /// A peer ended its side of the session while this side kept it (its resume window ran out
    /// first, or it reached a limit): what was written to it and not acknowledged may not have
    /// arrived, and requests waiting on it failed. It stays connected, in a new session.
    public static let peerEndedSession = Self("peerEndedSession")
    /// A suspended peer's process ended: its connection closed without a bye, and every address
    /// it was known at then refused a connection (nothing listens there any more), so its session
    /// cannot resume and what was pending for it failed at once, not at the end of its resume window.
    public static let peerExited = Self("peerExited")
}

extension PeerKitError {
    /// What was kept for a suspended peer (or not yet acknowledged by it) reached
    /// ``PeerConfiguration/maximumUnacknowledgedBytes``, so nothing more was taken.
    public static func sessionBufferFull(peer: String, unacknowledgedBytes: Int, limit: Int) -> PeerKitError {
        PeerKitError(.sessionBufferFull, ["peer": .text(peer), "unacknowledgedBytes": .number(unacknowledgedBytes), "limit": .number(limit)],
                     "\(peer.capitalizedFirst) has \(unacknowledgedBytes) bytes sent to it and not yet acknowledged, at the \(limit)-byte limit (PeerConfiguration.maximumUnacknowledgedBytes), so this was not sent. Its link is probably down; send again once it is back (peerResumed), or raise the limit.")
    }

    /// A peer's link stayed down for longer than ``PeerConfiguration/sessionResumeWindow``: its
    /// session ended, and what was pending for it failed.
    public static func sessionExpired(peer: String, window: Duration) -> PeerKitError {
        PeerKitError(.sessionExpired, ["peer": .text(peer), "window": .duration(window)],
                     "\(peer.capitalizedFirst) was unreachable for longer than its \(window.peerKitSeconds) resume window (PeerConfiguration.sessionResumeWindow), so it was disconnected and what was pending for it was dropped.")
    }

    /// A peer came back as a new process (a new session), so what was pending for its previous
    /// run failed.
    public static func peerRestarted(peer: String) -> PeerKitError {
        PeerKitError(.peerRestarted, ["peer": .text(peer)],
                     "\(peer.capitalizedFirst) restarted (it came back as a new process, so its session could not resume); what was pending for its previous run was dropped.")
    }

    /// A peer ended its side of the session while this side kept it (its resume window ran out
    /// first, or it reached a limit): the `lostMessages` messages written to it and not
    /// acknowledged may not have arrived, and requests waiting on it failed. It stays connected,
    /// in a new session. Published as ``PeerEvent/error(_:)``.
    public static func peerEndedSession(peer: String, lostMessages: Int) -> PeerKitError {
        let what = lostMessages == 0
            ? "nothing sent to it was lost, but requests waiting on it failed (their replies went with its side). It is connected again, in a new session; send those requests again."
            : "\(lostMessages) messages sent to it and not acknowledged may not have arrived, and requests waiting on it failed. It is connected again, in a new session; send again what must arrive."
        return PeerKitError(.peerEndedSession, ["peer": .text(peer), "lostMessages": .number(lostMessages)],
                            "\(peer.capitalizedFirst) ended its side of the session while this side kept it (its resume window ran out first, or it reached a limit), so \(what)")
    }

    /// A suspended peer's process ended: its connection closed without a bye, and every address
    /// it was known at then refused a connection (nothing listens there any more), so its session
    /// cannot resume and what was pending for it failed at once, not at the end of its resume window.
    /// `refusals` says where and how the connections were refused (a sentence fragment).
    public static func peerExited(peer: String, refusals: String) -> PeerKitError {
        PeerKitError(.peerExited, ["peer": .text(peer), "reason": .text(refusals)],
                     "\(peer.capitalizedFirst) is gone: its connection closed without a goodbye, and then \(refusals), so nothing listens there any more and its session cannot resume. What was pending for it was dropped; it is connected again if it starts again.")
    }

    /// The `lostMessages` the sentence names, for the codes that have one (`peerEndedSession`); nil for the others.
    public var lostMessages: Int? { number("lostMessages") }

    /// The `unacknowledgedBytes` the sentence names, for the codes that have one (`sessionBufferFull`); nil for the others.
    public var unacknowledgedBytes: Int? { number("unacknowledgedBytes") }

    /// The `window` the sentence names, for the codes that have one (`sessionExpired`); nil for the others.
    public var window: Duration? { duration("window") }
}
