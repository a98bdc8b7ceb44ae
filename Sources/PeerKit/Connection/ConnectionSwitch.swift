import NIOCore

/// What waits for a peer while it switches to the connection that won a tie-break.
///
/// When the peer's `bye` ("duplicate connection") closes the connection this side was using,
/// the winner is already on its way but its handshake has not completed here: for that moment
/// (at most the handshake timeout) the peer has no active connection, yet it has not gone.
/// `send(_:to:)`, requests and resources wait for the winner; frames broadcast meanwhile are
/// held and go out on the winner first, in order. If the winner does not come, the waiters get
/// nil and the held frames are dropped along with the peer, which is then reported
/// disconnected.
///
/// A value inside the connection manager's state, changed under its lock.
struct ConnectionSwitch {
    /// Senders waiting for the winner.
    var waiters: [CheckedContinuation<PeerConnection?, Never>] = []
    /// Frames broadcast meanwhile, oldest first.
    private(set) var heldFrames: [ByteBuffer] = []
    private(set) var heldBytes = 0

    /// Holds `frame` unless that would hold more than `limit` bytes (the peer's outbox limit,
    /// ``PeerConfiguration/maximumQueuedOutboundBytes``). Returns whether it did.
    mutating func hold(_ frame: ByteBuffer, limit: Int) -> Bool {
        guard heldBytes + frame.readableBytes <= limit else { return false }
        heldFrames.append(frame)
        heldBytes += frame.readableBytes
        return true
    }

    /// Ends the switch: returns what waited, and leaves nothing behind.
    mutating func end() -> Ended {
        defer { self = ConnectionSwitch() }
        return Ended(waiters: waiters, heldFrames: heldFrames)
    }

    /// What waited when a switch ended.
    struct Ended {
        let waiters: [CheckedContinuation<PeerConnection?, Never>]
        let heldFrames: [ByteBuffer]

        /// Queues the held frames on `winner` (call with the manager's lock held, so that no
        /// later frame overtakes them); without a winner they are dropped.
        func sendHeldFrames(on winner: PeerConnection) {
            for frame in heldFrames { winner.send(frame) }
        }

        /// Resumes the waiters with `winner` (nil: it did not come). Call without the lock.
        func resumeWaiters(with winner: PeerConnection?) {
            for waiter in waiters { waiter.resume(returning: winner) }
        }
    }
}
