import NIOConcurrencyHelpers
import NIOCore

/// Requests waiting for their replies, by request `id`.
///
/// A request is ``register(id:peerID:timeout:)``ed before it is sent, and ``attach(id:continuation:)``ed
/// once its caller waits for it, so that nothing that happens in between is lost: its reply, a
/// cancellation (whose handler may run before the continuation is made), a timeout or the peer's
/// disconnection is remembered and ends the request as soon as it attaches.
///
/// A reply is accepted only from the peer the request went to. Each request ends exactly once:
/// with its reply, its timeout, its cancellation, or its peer's disconnection.
///
/// **Timeouts.** One timer serves every request: it is armed for the earliest deadline
/// (``RequestDeadlines``), and when it fires it fails the requests whose deadlines passed and is
/// armed again for the next. A request with a later deadline than the armed one (each of a run of
/// requests with the same timeout) arms nothing, and a request that ends cancels nothing: the
/// timer, when it fires, finds it gone. A request with an earlier deadline than the armed one
/// arms the timer anew. So each request still fails at its own deadline, and a round trip costs no
/// timer of its own.
final class PendingRequests: Sendable {
    /// When a request times out, and how.
    struct Timeout: Sendable {
        /// How long after it is registered.
        var after: Duration
        /// Where the timer runs when this request's deadline arms it.
        var eventLoop: any EventLoop
        /// The error the request fails with, made when its deadline passes.
        var error: @Sendable () -> any Error
    }

    private struct Entry {
        var peerID: String
        var continuation: CheckedContinuation<Envelope, any Error>?
        /// The error the request fails with when its deadline passes; nil without a timeout.
        var timedOut: (@Sendable () -> any Error)?
        /// How the request ended before its continuation was attached: its reply or why it failed.
        var early: Result<Envelope, any Error>?

        /// Whether the request has not ended: no reply and no failure waits for its caller.
        var isWaiting: Bool { early == nil }

        /// What ``resolve(_:from:)`` made of a reply.
        enum Resolution {
            /// Not this request's: another peer's, or a second answer.
            case refused
            /// Kept in ``early`` for the caller, who does not wait yet.
            case kept
            /// The caller waits: resume it, and the request is done.
            case resume
        }

        /// Takes `envelope`, a reply from `peerID`. Called on the entry where it lies in the
        /// dictionary (`entries.values[index]`, through its `_modify` accessor): taking the entry
        /// out by its key and storing it back would copy it and hash its key again, and this runs
        /// for every request.
        mutating func resolve(_ envelope: Envelope, from peerID: String) -> Resolution {
            guard self.peerID == peerID, early == nil else { return .refused }
            guard continuation != nil else {
                early = .success(envelope)
                return .kept
            }
            return .resume
        }

        /// Attaches the caller's `continuation`; returns what came first instead (the reply, or
        /// why the request failed), when something did. In place, as ``resolve(_:from:)``.
        mutating func attach(_ continuation: CheckedContinuation<Envelope, any Error>) -> Result<Envelope, any Error>? {
            if let early { return early }
            self.continuation = continuation
            return nil
        }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var deadlines = RequestDeadlines()
        /// The timer that fails the requests whose deadlines passed, and the deadline it fires at.
        var armed: (deadline: NIODeadline, timer: PeerTimer)?
    }

    private let clock: PeerClock
    private let state = NIOLockedValueBox(State())

    /// Requests whose timeouts run on `clock`.
    init(clock: PeerClock = .continuous) {
        self.clock = clock
    }

    /// Registers a request, before its continuation exists; with a `timeout`, it fails with the
    /// timeout's error once its deadline passes, unless it ended before.
    func register(id: String, peerID: String, timeout: Timeout? = nil) {
        let deadline = timeout.map { clock.deadline(in: $0.after, on: $0.eventLoop) }
        let replaced = state.withLockedValue { state -> PeerTimer? in
            state.entries[id] = Entry(peerID: peerID, timedOut: timeout?.error)
            guard let timeout, let deadline else { return nil }
            if state.deadlines.add(id, deadline: deadline, liveCount: state.entries.count) {
                let entries = state.entries
                state.deadlines.rebuild { entries[$0]?.isWaiting == true }
            }
            if let armed = state.armed, armed.deadline <= deadline { return nil }
            // Scheduling runs none of our code, so it is done under the lock: the timer armed is
            // then always the one recorded. The one it replaces is cancelled after the lock.
            let replaced = state.armed?.timer
            state.armed = (deadline, arm(at: deadline, on: timeout.eventLoop))
            return replaced
        }
        replaced?.cancel()
    }

    /// Attaches the request's continuation. Returns how the request already ended (its reply, or
    /// the error that ended it) for the caller to resume the continuation with, or nil.
    func attach(id: String, continuation: CheckedContinuation<Envelope, any Error>) -> Result<Envelope, any Error>? {
        state.withLockedValue { state -> Result<Envelope, any Error>? in
            guard let index = state.entries.index(forKey: id) else { return .failure(CancellationError()) }
            guard let early = state.entries.values[index].attach(continuation) else { return nil }
            state.entries.remove(at: index)
            return early
        }
    }

    /// Resumes the request `envelope.replyTo` answers; false when none is waiting (late or foreign reply).
    func resolve(_ envelope: Envelope, from peerID: String) -> Bool {
        guard let id = envelope.replyTo else { return false }
        let (accepted, entry) = state.withLockedValue { state -> (Bool, Entry?) in
            guard let index = state.entries.index(forKey: id) else { return (false, nil) }
            switch state.entries.values[index].resolve(envelope, from: peerID) {
            case .refused: return (false, nil)
            case .kept: return (true, nil)  // answered before its caller waits: for attach(id:continuation:)
            case .resume: return (true, state.entries.remove(at: index).value)
            }
        }
        entry?.continuation?.resume(returning: envelope)
        return accepted
    }

    /// Fails one request (its cancellation, its timeout).
    func fail(id: String, with error: any Error) {
        let entry = state.withLockedValue { state in Self.end(id, with: error, in: &state.entries) }
        Self.resume(entry, throwing: error)
    }

    /// Fails every request to `peerID`.
    func failAll(peerID: String, with error: any Error) {
        let entries = state.withLockedValue { state -> [Entry] in
            state.entries.filter { $0.value.peerID == peerID }.keys.compactMap { Self.end($0, with: error, in: &state.entries) }
        }
        for entry in entries { Self.resume(entry, throwing: error) }
    }

    /// Fails every request, and stops the timeouts' timer (the transceiver stopped).
    func failAll(with error: any Error) {
        let (entries, timer) = state.withLockedValue { state -> ([Entry], PeerTimer?) in
            let ended = Array(state.entries.keys).compactMap { Self.end($0, with: error, in: &state.entries) }
            state.deadlines.removeAll()
            let timer = state.armed?.timer
            state.armed = nil
            return (ended, timer)
        }
        timer?.cancel()
        for entry in entries { Self.resume(entry, throwing: error) }
    }

    /// Forgets a request that ended (its caller is done with it).
    func remove(id: String) {
        state.withLockedValue { _ = $0.entries.removeValue(forKey: id) }
    }

    /// A timer for `deadline`, which runs ``timersDeadlinePassed(_:on:)`` on `eventLoop`.
    private func arm(at deadline: NIODeadline, on eventLoop: any EventLoop) -> PeerTimer {
        clock.schedule(on: eventLoop, at: deadline) { [weak self] in
            self?.timersDeadlinePassed(deadline, on: eventLoop)
        }
    }

    /// The timer armed for `deadline` fired: fails the requests whose deadlines passed and arms
    /// the timer, on the same loop, for the next deadline.
    private func timersDeadlinePassed(_ deadline: NIODeadline, on eventLoop: any EventLoop) {
        let now = max(clock.now(on: eventLoop), deadline)
        let due = state.withLockedValue { state -> [(id: String, error: @Sendable () -> any Error)] in
            // Only the armed timer fires: the one it replaced was cancelled first.
            guard state.armed?.deadline == deadline else { return [] }
            state.armed = nil
            let entries = state.entries
            let expired = state.deadlines.expired(at: now) { entries[$0]?.isWaiting == true }
            if let next = state.deadlines.earliest(isLive: { entries[$0]?.isWaiting == true }) {
                state.armed = (next, arm(at: next, on: eventLoop))
            }
            return expired.compactMap { id in entries[id]?.timedOut.map { (id, $0) } }
        }
        // The errors are made after the lock: making one asks the connection manager (under its
        // own lock) whether the peer's connection is down. A request that ended meanwhile stays
        // ended (``fail(id:with:)``).
        for (id, error) in due { fail(id: id, with: error()) }
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
        continuation.resume(throwing: error)
    }
}
