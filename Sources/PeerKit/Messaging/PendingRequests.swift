import NIOConcurrencyHelpers
import NIOCore

/// Requests waiting for their replies, by request `id`.
///
/// A request is ``register(id:peerID:)``ed before it is sent, and ``attach(id:continuation:)``ed
/// once its caller waits for it, so that nothing that happens in between is lost: its reply, a
/// cancellation (whose handler may run before the continuation is made), a timeout or the peer's
/// disconnection is remembered and ends the request as soon as it attaches.
///
/// A reply is accepted only from the peer the request went to. Each request ends exactly once:
/// with its reply, its timeout, its cancellation, or its peer's disconnection.
final class PendingRequests: Sendable {
    private struct Entry {
        var peerID: String
        var continuation: CheckedContinuation<Envelope, any Error>?
        var timeout: PeerTimer?
        /// How the request ended before its continuation was attached: its reply or why it failed.
        var early: Result<Envelope, any Error>?
    }

    private let pending = NIOLockedValueBox<[String: Entry]>([:])

    /// Registers a request, before its continuation exists.
    func register(id: String, peerID: String) {
        pending.withLockedValue { $0[id] = Entry(peerID: peerID) }
    }

    /// Attaches the request's continuation. Returns how the request already ended (its reply, or
    /// the error that ended it) for the caller to resume the continuation with, or nil.
    func attach(id: String, continuation: CheckedContinuation<Envelope, any Error>) -> Result<Envelope, any Error>? {
        pending.withLockedValue { pending -> Result<Envelope, any Error>? in
            guard var entry = pending[id] else { return .failure(CancellationError()) }
            if let early = entry.early {
                pending[id] = nil
                return early
            }
            entry.continuation = continuation
            pending[id] = entry
            return nil
        }
    }

    /// Attaches the timer that will fail the request, unless it has already ended.
    func setTimeout(id: String, _ timeout: PeerTimer) {
        let ended = pending.withLockedValue { pending -> Bool in
            guard pending[id] != nil, pending[id]?.early == nil else { return true }
            pending[id]?.timeout = timeout
            return false
        }
        if ended { timeout.cancel() }
    }

    /// Resumes the request `envelope.replyTo` answers; false when none is waiting (late or foreign reply).
    func resolve(_ envelope: Envelope, from peerID: String) -> Bool {
        guard let id = envelope.replyTo else { return false }
        // The timer is cancelled after the lock: with a test clock, cancelling runs its own code.
        let (accepted, entry, timeout) = pending.withLockedValue { pending -> (Bool, Entry?, PeerTimer?) in
            guard var entry = pending[id], entry.peerID == peerID, entry.early == nil else { return (false, nil, nil) }
            guard entry.continuation != nil else {
                // Answered before its caller waits for it: kept for attach(id:continuation:).
                let timeout = entry.timeout
                entry.early = .success(envelope)
                entry.timeout = nil
                pending[id] = entry
                return (true, nil, timeout)
            }
            let waiting = pending.removeValue(forKey: id)
            return (true, waiting, waiting?.timeout)
        }
        timeout?.cancel()
        entry?.continuation?.resume(returning: envelope)
        return accepted
    }

    /// Fails one request (its timeout, its cancellation).
    func fail(id: String, with error: any Error) {
        let entry = pending.withLockedValue { pending in Self.end(id, with: error, in: &pending) }
        Self.resume(entry, throwing: error)
    }

    /// Fails every request to `peerID`.
    func failAll(peerID: String, with error: any Error) {
        let entries = pending.withLockedValue { pending -> [Entry] in
            pending.filter { $0.value.peerID == peerID }.keys.compactMap { Self.end($0, with: error, in: &pending) }
        }
        for entry in entries { Self.resume(entry, throwing: error) }
    }

    /// Fails every request.
    func failAll(with error: any Error) {
        let entries = pending.withLockedValue { pending -> [Entry] in
            Array(pending.keys).compactMap { Self.end($0, with: error, in: &pending) }
        }
        for entry in entries { Self.resume(entry, throwing: error) }
    }

    /// Forgets a request that ended (its caller is done with it).
    func remove(id: String) {
        let entry = pending.withLockedValue { $0.removeValue(forKey: id) }
        entry?.timeout?.cancel()
    }

    /// Removes and returns the entry when its continuation is attached; otherwise remembers the
    /// failure (unless the request already ended) for ``attach(id:continuation:)``.
    private static func end(_ id: String, with error: any Error, in pending: inout [String: Entry]) -> Entry? {
        guard var entry = pending[id] else { return nil }
        guard entry.continuation != nil else {
            if entry.early == nil { entry.early = .failure(error) }
            pending[id] = entry
            return nil
        }
        return pending.removeValue(forKey: id)
    }

    private static func resume(_ entry: Entry?, throwing error: any Error) {
        guard let entry, let continuation = entry.continuation else { return }
        entry.timeout?.cancel()
        continuation.resume(throwing: error)
    }
}
