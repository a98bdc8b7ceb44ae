import NIOConcurrencyHelpers
import NIOCore

/// Requests waiting for their replies, by request `id`.
///
/// A reply is accepted only from the peer the request went to. Each request ends exactly once:
/// with its reply, its timeout, its cancellation, or its peer's disconnection.
final class PendingRequests: Sendable {
    private struct Pending {
        var peerID: String
        var continuation: CheckedContinuation<Envelope, any Error>
        var timeout: Scheduled<Void>?
    }

    private let pending = NIOLockedValueBox<[String: Pending]>([:])

    /// Adds a request. `timeout` is cancelled when the request ends another way.
    func add(id: String, peerID: String, continuation: CheckedContinuation<Envelope, any Error>) {
        pending.withLockedValue { $0[id] = Pending(peerID: peerID, continuation: continuation) }
    }

    /// Attaches the timer that will fail the request, unless it has already ended.
    func setTimeout(id: String, _ timeout: Scheduled<Void>) {
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
        let entry = pending.withLockedValue { pending -> Pending? in
            guard pending[id]?.peerID == peerID else { return nil }
            return pending.removeValue(forKey: id)
        }
        guard let entry else { return false }
        entry.timeout?.cancel()
        entry.continuation.resume(returning: envelope)
        return true
    }

    /// Fails one request.
    func fail(id: String, with error: any Error) {
        guard let entry = pending.withLockedValue({ $0.removeValue(forKey: id) }) else { return }
        entry.timeout?.cancel()
        entry.continuation.resume(throwing: error)
    }

    /// Fails every request to `peerID`.
    func failAll(peerID: String, with error: any Error) {
        let entries = pending.withLockedValue { pending -> [Pending] in
            let ids = pending.filter { $0.value.peerID == peerID }.map(\.key)
            return ids.compactMap { pending.removeValue(forKey: $0) }
        }
        for entry in entries {
            entry.timeout?.cancel()
            entry.continuation.resume(throwing: error)
        }
    }

    /// Fails every request.
    func failAll(with error: any Error) {
        let entries = pending.withLockedValue { pending -> [Pending] in
            defer { pending = [:] }
            return Array(pending.values)
        }
        for entry in entries {
            entry.timeout?.cancel()
            entry.continuation.resume(throwing: error)
        }
    }
}
