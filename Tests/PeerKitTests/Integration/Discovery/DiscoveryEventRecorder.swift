import Foundation
import PeerKit
import Synchronization

/// Records the events a discovery backend reports and lets a test wait, with a deadline, for one
/// that matches.
final class DiscoveryEventRecorder: Sendable {
    struct TimedOut: Error, CustomStringConvertible {
        var awaited: String
        var timeout: Duration
        var events: [DiscoveryEvent]
        var description: String {
            "No event matching \"\(awaited)\" arrived within \(timeout). Events so far: \(events)"
        }
    }

    private struct Waiter {
        var predicate: @Sendable (DiscoveryEvent) -> Bool
        var continuation: CheckedContinuation<DiscoveryEvent, any Error>
        var timeout: Task<Void, Never>?
    }

    private struct State {
        var events: [DiscoveryEvent] = []
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// The closure to hand to ``PeerDiscovery/start(_:onEvent:)``.
    var onEvent: @Sendable (DiscoveryEvent) -> Void {
        { [self] event in record(event) }
    }

    /// Every event so far, in order.
    var events: [DiscoveryEvent] { state.withLock { $0.events } }

    /// The number of events so far; pass it as `after` to wait only for later events.
    var count: Int { state.withLock { $0.events.count } }

    private func record(_ event: DiscoveryEvent) {
        let ready = state.withLock { state -> [Waiter] in
            state.events.append(event)
            let matching = state.waiters.filter { $0.value.predicate(event) }
            for key in matching.keys { state.waiters[key] = nil }
            return Array(matching.values)
        }
        for waiter in ready {
            waiter.timeout?.cancel()
            waiter.continuation.resume(returning: event)
        }
    }

    /// The first event (among those after the first `after` ones) that matches, waiting up to `timeout`.
    @discardableResult
    func first(_ awaited: String, after: Int = 0, timeout: Duration = .seconds(20),
               where predicate: @escaping @Sendable (DiscoveryEvent) -> Bool) async throws -> DiscoveryEvent {
        try await withCheckedThrowingContinuation { continuation in
            let id = state.withLock { state -> Int? in
                if let event = state.events.dropFirst(after).first(where: predicate) {
                    continuation.resume(returning: event)
                    return nil
                }
                let id = state.nextWaiter
                state.nextWaiter += 1
                state.waiters[id] = Waiter(predicate: predicate, continuation: continuation)
                return id
            }
            guard let id else { return }
            let timeoutTask = Task { [self] in
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                let expired = state.withLock { state in (state.waiters.removeValue(forKey: id), state.events) }
                expired.0?.continuation.resume(throwing: TimedOut(awaited: awaited, timeout: timeout, events: expired.1))
            }
            state.withLock { state in
                if state.waiters[id] != nil { state.waiters[id]?.timeout = timeoutTask } else { timeoutTask.cancel() }
            }
        }
    }

    /// The first `.found` service named `name` (or any, when nil) other than those in `excluding`.
    func found(named name: String? = nil, after: Int = 0, timeout: Duration = .seconds(20)) async throws -> DiscoveredService {
        let event = try await first("found \(name ?? "any service")", after: after, timeout: timeout) { event in
            guard case let .found(service) = event else { return false }
            return name == nil || service.name == name
        }
        guard case let .found(service) = event else { preconditionFailure("the predicate only accepts .found") }
        return service
    }

    /// The first `.advertised` name.
    func advertisedName(after: Int = 0, timeout: Duration = .seconds(20)) async throws -> String {
        let event = try await first("advertised", after: after, timeout: timeout) { event in
            if case .advertised = event { return true }
            return false
        }
        guard case let .advertised(name) = event else { preconditionFailure("the predicate only accepts .advertised") }
        return name
    }
}
