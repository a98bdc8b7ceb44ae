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
