import Logging

/// What ``ResourceTransfers`` reads of a transfer to tell whether it stalled: a transfer that
/// waits on its peer and has made no progress for ``PeerConfiguration/resourceStallTimeout`` is
/// cancelled.
struct ResourceStallStatus: Sendable {
    /// The transfer completed or failed.
    var ended: Bool
    /// It cannot go on until the peer does something.
    var waitsOnPeer: Bool
    /// When it last made progress, as an offset of the transceiver's ``PeerClock``.
    var lastProgress: Duration
}

/// A transfer whose stalls ``ResourceTransfers`` watches: ``IncomingResource`` and
/// ``OutgoingResource``.
protocol StallWatchedResource: AnyObject, Sendable {
    /// The connection it travels on.
    var connection: PeerConnection { get }
    /// Whether it ended, waits on its peer, and when it last made progress.
    var stallStatus: ResourceStallStatus { get }
    /// Cancels it, on both sides, because it waited on its peer for `timeout` without progress.
    func cancelStalled(after timeout: Duration, logger: Logger)
}

extension IncomingResource: StallWatchedResource {}
extension OutgoingResource: StallWatchedResource {}
