import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOFileSystem

/// A resource arriving from a peer, handed to the handler registered for its name with
/// ``PeerTransceiver/receiveResources(named:using:)``.
///
/// Read it once, either as chunks or into a file:
///
/// ```swift
/// transceiver.receiveResources(named: "store") { resource in
///     try await resource.write(to: URL(filePath: "/var/lib/app/store.sqlite"))
/// }
/// ```
///
/// The sender sends only as much as the receiver's window (``PeerConfiguration/resourceWindowBytes``)
/// allows ahead of what the handler has read, so a slow handler slows the sender rather than
/// filling memory. The SHA-256 digest of the whole resource is checked before the last chunk is
/// reported read: ``chunks`` ends normally only for a complete, intact resource, and
/// ``write(to:)`` makes the file appear under its name only then.
public final class IncomingResource: Sendable {
    /// The name the sender gave it (what the handler is registered for).
    public let name: String
    /// The peer sending it.
    public let sender: Peer
    /// The size the sender announced, when it knew it.
    public let size: Int64?
    /// The receiver's view of the transfer: bytes read by the handler, and the rate. The stream
    /// keeps only the newest value and ends when the transfer ends.
    public var progress: AsyncStream<ResourceProgress> { meter.stream }
    /// The resource's bytes, in order, as they arrive; iterate once. Each buffer is what one read
    /// from the connection carried of a chunk (at most ``PeerConfiguration/resourceChunkLength``
    /// bytes, often less): the boundaries carry no meaning. The sequence ends after the
    /// last chunk once the digest checked out, and throws if it does not
    /// (``PeerKitError/resourceDigestMismatch(name:peer:)``), or if the transfer is cancelled or
    /// its connection ends.
    public var chunks: ResourceChunks { ResourceChunks(resource: self) }

    let transfer: UInt32
    let connection: PeerConnection
    let window: Int
    /// The longest chunk the sender may send (what this side announced).
    let chunkLength: Int
    /// Read bytes are acknowledged once this many have gathered (see ``init``).
    let acknowledgementStep: Int
    /// Reads the time of the last progress (see ``stallStatus``).
    private let clock: PeerClock
    private let meter: ProgressMeter
    private let state: NIOLockedValueBox<State>
    private let onEnd: @Sendable () -> Void

    private struct State {
        var buffered = CircularBuffer<ByteBuffer>()
        var bufferedBytes = 0
        var received: Int64 = 0
        /// Bytes read by the handler and not acknowledged yet.
        var unacknowledged = 0
        var end: ResourceFrame.End?
        var completed = false
        var failure: PeerKitError?
        var waiter: CheckedContinuation<Void, Never>?
        /// When a chunk or the end last arrived, or the handler last read (a clock offset).
        var lastProgress: Duration
    }

    /// A resource whose sender may be `window` bytes ahead of what the handler read, in chunks
    /// of at most `chunkLength` bytes.
    ///
    /// Read bytes are acknowledged in steps of a quarter of the window (and never more than
    /// the window less one chunk, so the sender, which waits only when its next chunk would go
    /// past the window, always has room once the handler caught up): a 4 MiB window is
    /// acknowledged every 1 MiB, not after every chunk or every read from the socket.
    init(name: String, sender: Peer, size: Int64?, transfer: UInt32, connection: PeerConnection, window: Int, chunkLength: Int, clock: PeerClock, onEnd: @escaping @Sendable () -> Void) {
        self.name = name
        self.sender = sender
        self.size = size
        self.transfer = transfer
        self.connection = connection
        self.window = window
        self.chunkLength = chunkLength
        self.acknowledgementStep = max(1, min(window / 4, window - chunkLength))
        self.clock = clock
        self.state = NIOLockedValueBox(State(lastProgress: clock.offset))
        self.onEnd = onEnd
        self.meter = ProgressMeter(totalBytes: size)
    }

    /// Stops the transfer and tells the sender. Does nothing once it ended.
    public func cancel() {
        fail(.resourceCancelled(name: name, peer: connection.description, reason: "the receiver cancelled it"), tellPeer: "the receiver cancelled it")
    }

    /// Writes the resource to `url`, replacing any file there, but only once it is complete and
    /// its digest checked out: the bytes go to a temporary file beside it, which is renamed to
    /// `url` at the end (NIO's transactional file creation). If the transfer fails, is cancelled
    /// or is corrupted, the temporary file is removed and nothing appears under `url`.
    public func write(to url: URL) async throws {
        let handle = try await FileSystem.shared.openFile(forWritingAt: FilePath(url.path), options: .newFile(replaceExisting: true))
        do {
            var offset: Int64 = 0
            for try await chunk in chunks {
                try await handle.write(contentsOf: chunk.readableBytesView, toAbsoluteOffset: offset)
                offset += Int64(chunk.readableBytes)
            }
            try await handle.close(makeChangesVisible: true)
        } catch {
            try? await handle.close(makeChangesVisible: false)
            if !isEnded { cancelAfterLocalFailure("the receiver could not write it to a file: \(error)") }
            throw error
        }
    }

    /// Whether every byte arrived and the digest checked out.
    var isComplete: Bool { state.withLockedValue { $0.completed } }

    /// The handler returned after reading the whole, intact resource: tell the sender.
    func confirm() {
        connection.send(ResourceFrame.frame(ResourceFrame.done, ResourceFrame.Done(transfer: transfer)))
    }

    /// The handler failed after reading the whole resource: tell the sender why.
    func refuseAfterCompletion(_ reason: String) {
        let text = LogSafe.text(reason, maximumBytes: ResourceFrame.maximumReasonLength)
        connection.send(ResourceFrame.frame(ResourceFrame.refuse, ResourceFrame.Stop(transfer: transfer, reason: text)))
    }

    /// Bytes arrived so far.
    var receivedBytes: Int64 { state.withLockedValue { $0.received } }

    /// Pieces shorter than this are appended to the piece before them when that one is short too:
    /// every buffered piece but the last is then at least this long or followed by one that is,
    /// so a window of tiny chunk frames holds at most one buffer per 2 KiB.
    static let smallPiece = 4096

    /// How many buffers hold the bytes not yet read (a diagnostic for tests).
    var bufferedPieceCount: Int { state.withLockedValue { $0.buffered.count } }

    /// Whether the transfer completed or failed.
    var isEnded: Bool { state.withLockedValue { $0.completed || $0.failure != nil } }

    // MARK: The consumer

    /// The next chunk, or nil at the end of an intact resource.
    func next(hashingInto hasher: inout SHA256) async throws -> ByteBuffer? {
        while true {
            enum Step { case chunk(ByteBuffer, acknowledge: Bool), end(ResourceFrame.End), finished, failed(PeerKitError), wait }
            let now = clock.offset  // read before the lock: the clock may be the user's
            let step = state.withLockedValue { state -> Step in
                if let failure = state.failure { return .failed(failure) }
                if let chunk = state.buffered.popFirst() {
                    state.bufferedBytes -= chunk.readableBytes
                    state.unacknowledged += chunk.readableBytes
                    state.lastProgress = now
                    if state.unacknowledged >= acknowledgementStep {
                        state.unacknowledged = 0
                        return .chunk(chunk, acknowledge: true)
                    }
                    return .chunk(chunk, acknowledge: false)
                }
                if state.completed { return .finished }
                if let end = state.end { return .end(end) }
                return .wait
            }
            switch step {
            case let .chunk(chunk, acknowledge):
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                meter.advance(by: chunk.readableBytes)
                if acknowledge {
                    connection.send(ResourceFrame.frame(ResourceFrame.ack, ResourceFrame.Ack(transfer: transfer, received: meter.bytesDone)))
                }
                return chunk
            case let .end(end):
                let digest = ResourceDigest.hex(hasher.finalize())
                let done = meter.bytesDone
                guard done == end.size, digest == end.sha256.lowercased() else {
                    let error = PeerKitError.resourceDigestMismatch(name: name, peer: connection.description)
                    fail(error, tellPeer: "its SHA-256 digest or size does not match what arrived (\(done) bytes)")
                    throw error
                }
                let first = state.withLockedValue { state -> Bool in
                    guard !state.completed, state.failure == nil else { return false }
                    state.completed = true
                    return true
                }
                if first {
                    // Every byte is read and checked: acknowledged at once, so that the sender
                    // knows it waits on this handler, not on a stalled peer. `done` goes to the
                    // sender once the handler returned (``confirm()``).
                    connection.send(ResourceFrame.frame(ResourceFrame.ack, ResourceFrame.Ack(transfer: transfer, received: done)))
                    meter.finish()
                    onEnd()
                }
                return nil
            case .finished:
                return nil
            case let .failed(error):
                throw error
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let parked = state.withLockedValue { state -> Bool in
                        guard state.failure == nil, state.buffered.isEmpty, state.end == nil, !state.completed else { return false }
                        state.waiter = continuation
                        return true
                    }
                    if !parked { continuation.resume() }
                }
            }
        }
    }

    // MARK: Events from the sender (on the connection's event loop)

    /// A chunk arrived. Returns what is wrong with it (a protocol violation) or nil.
    func chunkArrived(_ data: ByteBuffer) -> String? {
        var waiter: CheckedContinuation<Void, Never>?
        let now = clock.offset
        let problem = state.withLockedValue { state -> String? in
            guard state.failure == nil, !state.completed else { return nil }
            if state.end != nil {
                return "a chunk of the resource \"\(LogSafe.text(name, maximumBytes: 80))\" arrived after its peerkit.resource.end"
            }
            if state.bufferedBytes + data.readableBytes > window {
                return "the resource \"\(LogSafe.text(name, maximumBytes: 80))\" sent \(state.bufferedBytes + data.readableBytes) bytes ahead of what was acknowledged, over the \(window)-byte window it was granted"
            }
            if let size, state.received + Int64(data.readableBytes) > size {
                return "the resource \"\(LogSafe.text(name, maximumBytes: 80))\" sent more than the \(size) bytes it announced"
            }
            if data.readableBytes < Self.smallPiece, (state.buffered.last?.readableBytes ?? Self.smallPiece) < Self.smallPiece {
                // A run of small pieces (tiny chunk frames, a trickling sender) is gathered into
                // one buffer, so what the window holds costs its bytes, not a buffer per byte.
                // Taken out first, so that the buffer is not shared and grows in place.
                var gathered = state.buffered.removeLast()
                gathered.writeImmutableBuffer(data)
                state.buffered.append(gathered)
            } else {
                state.buffered.append(data)
            }
            state.bufferedBytes += data.readableBytes
            state.received += Int64(data.readableBytes)
            // Only bytes count as progress: empty chunk frames keep nothing alive.
            if data.readableBytes > 0 { state.lastProgress = now }
            waiter = state.waiter
            state.waiter = nil
            return nil
        }
        waiter?.resume()
        return problem
    }

    /// The sender's `end` arrived.
    func endArrived(_ end: ResourceFrame.End) -> String? {
        var waiter: CheckedContinuation<Void, Never>?
        let now = clock.offset
        let problem = state.withLockedValue { state -> String? in
            guard state.failure == nil, !state.completed else { return nil }
            guard state.end == nil else { return "a second peerkit.resource.end arrived for the resource \"\(LogSafe.text(name, maximumBytes: 80))\"" }
            state.end = end
            state.lastProgress = now
            waiter = state.waiter
            state.waiter = nil
            return nil
        }
        waiter?.resume()
        return problem
    }

    /// The transfer failed: the sender cancelled it, the connection ended, the transceiver
    /// stopped, or this side gave up. `tellPeer`: the reason to send in `peerkit.resource.refuse`.
    func fail(_ error: PeerKitError, tellPeer reason: String?) {
        let (first, waiter) = state.withLockedValue { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard state.failure == nil, !state.completed else { return (false, nil) }
            state.failure = error
            state.buffered.removeAll()
            state.bufferedBytes = 0
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        guard first else { return }
        waiter?.resume()
        meter.abandon()
        if let reason {
            let text = LogSafe.text(reason, maximumBytes: ResourceFrame.maximumReasonLength)
            connection.send(ResourceFrame.frame(ResourceFrame.refuse, ResourceFrame.Stop(transfer: transfer, reason: text)))
        }
        onEnd()
    }

    /// Whether the transfer ended; whether it waits on the sender, that is, the window has room
    /// for a whole chunk and the end has not arrived; and when it last made progress.
    var stallStatus: ResourceStallStatus {
        state.withLockedValue { state in
            let outstanding = state.bufferedBytes + state.unacknowledged
            return ResourceStallStatus(
                ended: state.completed || state.failure != nil,
                waitsOnPeer: state.end == nil && (outstanding == 0 || outstanding + chunkLength <= window),
                lastProgress: state.lastProgress
            )
        }
    }

    /// Nothing arrived for `timeout` though the window had room: cancel it, telling the sender.
    func cancelStalled(after timeout: Duration, logger: Logger) {
        let reason = "nothing arrived for \(timeout) (PeerConfiguration.resourceStallTimeout)"
        logger.notice("Cancelled the resource \"\(LogSafe.text(name, maximumBytes: 80))\" from \(connection): \(reason).")
        fail(.resourceCancelled(name: name, peer: connection.description, reason: reason), tellPeer: "this peer cancelled it: " + reason)
    }

    /// The handler gave up on the resource: cancel it with `reason`.
    func cancelAfterLocalFailure(_ reason: String) {
        fail(.resourceCancelled(name: name, peer: connection.description, reason: reason), tellPeer: reason)
    }
}

/// The bytes of an ``IncomingResource``, chunk by chunk (each at most the chunk length the
/// receiver announced). Iterate it once.
public struct ResourceChunks: AsyncSequence, Sendable {
    /// A chunk of the resource.
    public typealias Element = ByteBuffer

    let resource: IncomingResource

    /// Creates the iterator; the digest is computed as the chunks are read.
    public func makeAsyncIterator() -> Iterator {
        Iterator(resource: resource)
    }

    /// Reads the chunks and hashes them.
    public struct Iterator: AsyncIteratorProtocol {
        let resource: IncomingResource
        var hasher = SHA256()

        /// The next chunk, or nil at the end of an intact resource.
        public mutating func next() async throws -> ByteBuffer? {
            try await resource.next(hashingInto: &hasher)
        }
    }
}
