import Crypto
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// A resource being sent to one peer: its progress, a way to cancel it, and its outcome.
///
/// ```swift
/// let transfer = try await transceiver.send(resource: .file(backupURL), named: "store", to: peer)
/// Task { for await step in transfer.progress { print(step.bytesDone) } }
/// try await transfer.finished()   // digest checked, the receiver's handler returned
/// ```
///
/// The bytes are read from the ``ResourceSource`` as the receiver's window allows, one chunk at a
/// time, and are written to the connection only when no other frame waits, so messages, requests
/// and pings to the same peer wait for at most one chunk.
public final class OutgoingResource: Sendable {
    /// The name the receiver's handler is registered for.
    public let name: String
    /// The receiver.
    public let peer: Peer
    /// The sender's view of the transfer: bytes the receiver has taken, and the rate. The
    /// receiver acknowledges what its handler read in steps of a quarter of its window (1 MiB by
    /// default), so this moves in such steps. The stream keeps only the newest value and ends
    /// when the transfer ends.
    public var progress: AsyncStream<ResourceProgress> { meter.stream }

    let transfer: UInt32
    let connection: PeerConnection
    private let meter: ProgressMeter
    /// Reads the time of the last progress (see ``stallStatus``).
    private let clock: PeerClock
    private let state: NIOLockedValueBox<State>
    private let outcome = NIOLockedValueBox(Outcome.running(waiters: []))

    /// How the transfer ended, for ``finished()``.
    private enum Outcome {
        case running(waiters: [CheckedContinuation<Void, any Error>])
        case ended(Result<Void, any Error>)
    }

    private struct State {
        /// The receiver's window and chunk length, once it accepted.
        var accepted: (window: Int, chunk: Int)?
        /// Bytes the receiver has taken.
        var acked: Int64 = 0
        /// Every byte sent, once the `end` went out.
        var sentAll: Int64?
        var done = false
        var failure: PeerKitError?
        var waiter: CheckedContinuation<Void, Never>?
        /// When the receiver last took bytes or accepted, or this side last sent (a clock offset).
        var lastProgress: Duration
    }

    init(name: String, peer: Peer, transfer: UInt32, connection: PeerConnection, totalBytes: Int64?, clock: PeerClock) {
        self.name = name
        self.peer = peer
        self.transfer = transfer
        self.connection = connection
        self.meter = ProgressMeter(totalBytes: totalBytes)
        self.clock = clock
        self.state = NIOLockedValueBox(State(lastProgress: clock.offset))
    }

    /// Whether the transfer ended; whether it waits on the receiver (for its acceptance, room in
    /// its window, or the rest of its acknowledgements; once the receiver has taken every byte,
    /// waiting for `done` is waiting on its handler, which is not a stall); and when it last made
    /// progress.
    var stallStatus: ResourceStallStatus {
        state.withLockedValue { state in
            let allTaken = state.sentAll.map { state.acked >= $0 } ?? false
            return ResourceStallStatus(ended: state.done || state.failure != nil, waitsOnPeer: state.waiter != nil && !allTaken, lastProgress: state.lastProgress)
        }
    }

    /// Returns once the receiver confirmed the resource: every byte arrived, the digest checked
    /// out, and its handler returned without an error (so a file it wrote is in place).
    /// - Throws: ``PeerKitError/resourceRefused(name:peer:reason:)`` (refused, or cancelled by the
    ///   receiver), ``PeerKitError/resourceCancelled(name:peer:reason:)`` (cancelled here),
    ///   ``PeerKitError/resourceSourceFailed(name:reason:)``, or why the connection ended.
    public func finished() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let ended = outcome.withLockedValue { outcome -> Result<Void, any Error>? in
                switch outcome {
                case let .ended(result):
                    return result
                case var .running(waiters):
                    waiters.append(continuation)
                    outcome = .running(waiters: waiters)
                    return nil
                }
            }
            if let ended { continuation.resume(with: ended) }
        }
    }

    /// Stops sending and tells the receiver, which discards what it got. Does nothing once the
    /// transfer ended.
    public func cancel() {
        fail(.resourceCancelled(name: name, peer: connection.description, reason: "the sender cancelled it"), tellPeer: true)
    }

    // MARK: Driving the transfer

    /// Sends the resource as a child task of the session (`tasks`), so that no transfer outlives
    /// it; `onEnd` runs when the transfer ended, before ``finished()`` returns. Without `tasks`
    /// (a transfer manager on its own, in tests) it runs in a task of its own.
    /// `whenConnectionEnds` is the failure when the connection ends under the transfer, the one
    /// the transfer manager gives every transfer on that connection: whichever of the two hears
    /// of the end first, the transfer fails with it.
    func start(_ source: ResourceSource, chunkLength: Int, tasks: SessionTasks?,
               whenConnectionEnds: @escaping @Sendable () -> PeerKitError, onEnd: @escaping @Sendable () -> Void) {
        let job: @Sendable () async -> Void = {
            let result: Result<Void, any Error>
            do {
                try await self.run(source, chunkLength: chunkLength, whenConnectionEnds: whenConnectionEnds)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            onEnd()
            self.end(with: result)
        }
        guard let tasks else {
            Task { await job() }
            return
        }
        if !tasks.start(job) {
            let stopped = PeerKitError.resourceCancelled(name: name, peer: connection.description, reason: "the sending transceiver stopped")
            fail(stopped, tellPeer: false)
            onEnd()
            end(with: .failure(stopped))
        }
    }

    /// Records how the transfer ended and tells every caller of ``finished()``.
    private func end(with result: Result<Void, any Error>) {
        let waiters = outcome.withLockedValue { outcome -> [CheckedContinuation<Void, any Error>] in
            guard case let .running(waiters) = outcome else { return [] }
            outcome = .ended(result)
            return waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    private func run(_ source: ResourceSource, chunkLength localChunkLength: Int, whenConnectionEnds: @Sendable () -> PeerKitError) async throws {
        do {
            let size: Int64?
            do {
                size = try await source.size()
            } catch {
                throw PeerKitError.resourceSourceFailed(name: name, reason: "\(error)")
            }
            meter.setTotal(size)
            connection.send(ResourceFrame.frame(ResourceFrame.offer, ResourceFrame.Offer(transfer: transfer, name: name, size: size)))
            noteProgress()
            let (window, receiverChunk) = try await waitForAcceptance()
            let chunkLength = max(1, min(localChunkLength, receiverChunk, window))
            var hasher = SHA256()
            var sent: Int64 = 0
            do {
                try await source.produce(chunkLength) { buffer in
                    var buffer = buffer
                    while buffer.readableBytes > 0 {
                        guard let slice = buffer.readSlice(length: min(chunkLength, buffer.readableBytes)) else { break }
                        if let size, sent + Int64(slice.readableBytes) > size {
                            throw PeerKitError.resourceSourceFailed(name: name, reason: "it yielded more than the \(size) bytes it announced")
                        }
                        try await waitForWindow(sent: sent, adding: slice.readableBytes, window: window)
                        slice.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                        try await connection.sendBulk(ResourceChunkFrame.head(transfer: transfer, dataLength: slice.readableBytes), data: slice)
                        sent += Int64(slice.readableBytes)
                        noteProgress()
                    }
                }
            } catch let error as PeerKitError {
                throw error
            } catch {
                throw PeerKitError.resourceSourceFailed(name: name, reason: "\(error)")
            }
            if let size, sent != size {
                throw PeerKitError.resourceSourceFailed(name: name, reason: "it yielded \(sent) bytes, not the \(size) it announced")
            }
            let digest = ResourceDigest.hex(hasher.finalize())
            // Behind the last chunk (chunks wait for a lull; an ordinary frame would overtake them).
            try await connection.sendBulk(ResourceFrame.frame(ResourceFrame.end, ResourceFrame.End(transfer: transfer, size: sent, sha256: digest)))
            noteProgress(sentAll: sent)
            try await waitUntilDone()
            // `done` means the handler read every byte; the last acknowledgement may cover less
            // (the receiver acknowledges in steps).
            acknowledged(sent)
            meter.finish()
        } catch {
            if connection.isClosed {
                fail(whenConnectionEnds(), tellPeer: false)
            } else {
                fail(error as? PeerKitError ?? .resourceSourceFailed(name: name, reason: "\(error)"), tellPeer: true)
            }
            throw state.withLockedValue { $0.failure } ?? error
        }
    }

    /// This side sent something (with `sentAll`, the `end` after that many bytes): a wait on the
    /// receiver that follows starts now.
    private func noteProgress(sentAll: Int64? = nil) {
        let now = clock.offset
        state.withLockedValue { state in
            state.lastProgress = now
            if let sentAll { state.sentAll = sentAll }
        }
    }

    private func waitForAcceptance() async throws(PeerKitError) -> (window: Int, chunk: Int) {
        var accepted: (window: Int, chunk: Int)?
        try await wait { state in
            accepted = state.accepted
            return accepted != nil
        }
        guard let accepted else { throw PeerKitError.connectionClosed(peer: connection.description) }
        return accepted
    }

    private func waitForWindow(sent: Int64, adding count: Int, window: Int) async throws(PeerKitError) {
        try await wait { state in sent - state.acked + Int64(count) <= Int64(window) || sent == state.acked }
    }

    private func waitUntilDone() async throws(PeerKitError) {
        try await wait { $0.done }
    }

    /// Waits until `ready` holds (checked under the lock), or throws the transfer's failure.
    private func wait(until ready: (State) -> Bool) async throws(PeerKitError) {
        while true {
            let check = state.withLockedValue { state -> Result<Bool, PeerKitError> in
                if let failure = state.failure { return .failure(failure) }
                return .success(ready(state))
            }
            switch check {
            case let .failure(error): throw error
            case .success(true): return
            case .success(false): break
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = state.withLockedValue { state -> Bool in
                    guard state.failure == nil, !ready(state) else { return false }
                    state.waiter = continuation
                    return true
                }
                if !parked { continuation.resume() }
            }
        }
    }

    private func update(_ body: (inout State) -> Void) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            body(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: Events from the receiver (on the connection's event loop)

    func accepted(window: Int, chunk: Int) {
        let now = clock.offset
        update { state in
            guard state.accepted == nil else { return }
            state.accepted = (window, chunk)
            state.lastProgress = now
        }
    }

    /// The receiver has taken `received` bytes in total.
    func acknowledged(_ received: Int64) {
        var advanced = 0
        let now = clock.offset
        update { state in
            // Only bytes taken count as progress: repeating an acknowledgement keeps nothing alive.
            if received > state.acked {
                advanced = Int(received - state.acked)
                state.acked = received
                state.lastProgress = now
            }
        }
        if advanced > 0 { meter.advance(by: advanced) }
    }

    func completed() {
        update { $0.done = true }  // ends the transfer: no progress to record
    }

    /// The receiver took nothing for `timeout`: cancel it, telling the receiver.
    func cancelStalled(after timeout: Duration, logger: Logger) {
        let reason = "the receiver took nothing for \(timeout) (PeerConfiguration.resourceStallTimeout)"
        logger.notice("Cancelled the resource \"\(LogSafe.text(name, maximumBytes: 80))\" to \(connection): \(reason).")
        fail(.resourceCancelled(name: name, peer: connection.description, reason: reason), tellPeer: true)
    }

    /// The transfer ended without success: `error` says why; `tellPeer` sends
    /// `peerkit.resource.cancel` (when the failure is this side's).
    func fail(_ error: PeerKitError, tellPeer: Bool) {
        var first = false
        update { state in
            guard state.failure == nil, !state.done else { return }
            state.failure = error
            first = true
        }
        guard first else { return }
        meter.abandon()
        if tellPeer {
            let reason = LogSafe.text(error.description, maximumBytes: ResourceFrame.maximumReasonLength)
            connection.send(ResourceFrame.frame(ResourceFrame.cancel, ResourceFrame.Stop(transfer: transfer, reason: reason)))
        }
    }
}
