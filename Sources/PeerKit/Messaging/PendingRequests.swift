import NIOConcurrencyHelpers
import NIOCore

/// Requests waiting for their replies, by request `id`.
///
/// A request is ``register(id:peerID:)``ed before its continuation exists and
/// ``attach(id:continuation:)``ed once it does, so that nothing that happens in between is lost:
/// a cancellation (whose handler may run before the continuation is made), a timeout or the
/// peer's disconnection is remembered and ends the request as soon as it attaches.
///
/// A reply is accepted only from the peer the request went to. Each request ends exactly once:
/// with its reply, its timeout, its cancellation, or its peer's disconnection.
final class PendingRequests: Sendable {
    private struct Entry {
        var peerID: String
        var continuation: CheckedContinuation<Envelope, any Error>?
        var timeout: PeerTimer?
        /// Why the request ended before its continuation was attached.
        var earlyFailure: (any Error)?
    }

    private let pending = NIOLockedValueBox<[String: Entry]>([:])

    /// Registers a request, before its continuation exists.
    func register(id: String, peerID: String) {
        pending.withLockedValue { $0[id] = Entry(peerID: peerID) }
    }

    /// Attaches the request's continuation. Returns the error that already ended the request
    /// (the caller fails the continuation with it and sends nothing), or nil.
    func attach(id: String, continuation: CheckedContinuation<Envelope, any Error>) -> (any Error)? {
        pending.withLockedValue { pending -> (any Error)? in
            guard var entry = pending[id] else { return CancellationError() }
            if let failure = entry.earlyFailure {
                pending[id] = nil
                return failure
            }
            entry.continuation = continuation
            pending[id] = entry
            return nil
        }
    }

    /// Attaches the timer that will fail the request, unless it has already ended.
    func setTimeout(id: String, _ timeout: PeerTimer) {
        let ended = pending.withLockedValue { pending -> Bool in
            guard pending[id] != nil else { return true }
            pending[id]?.timeout = timeout
            return false
        }
        if ended { timeout.cancel() }
    }

    /// Resumes the request `envelope.replyTo` answers; false when none is waiting (late or foreign reply).
    func resolve(_ envelope: Envelope, from peerID: String) -> Bool {
        guard let id = envelope.replyTo else { return false }
        let entry = pending.withLockedValue { pending -> Entry? in
            guard let entry = pending[id], entry.peerID == peerID, entry.continuation != nil else { return nil }
            return pending.removeValue(forKey: id)
        }
        guard let entry, let continuation = entry.continuation else { return false }
        entry.timeout?.cancel()
        continuation.resume(returning: envelope)
        return true
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
    /// failure for ``attach(id:continuation:)``.
    private static func end(_ id: String, with error: any Error, in pending: inout [String: Entry]) -> Entry? {
        guard var entry = pending[id] else { return nil }
        guard entry.continuation != nil else {
            if entry.earlyFailure == nil { entry.earlyFailure = error }
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
