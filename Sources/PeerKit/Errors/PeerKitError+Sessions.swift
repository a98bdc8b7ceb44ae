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

    /// The `unacknowledgedBytes` the sentence names, for the codes that have one (`sessionBufferFull`); nil for the others.
    public var unacknowledgedBytes: Int? { number("unacknowledgedBytes") }

    /// The `window` the sentence names, for the codes that have one (`sessionExpired`); nil for the others.
    public var window: Duration? { duration("window") }
}
