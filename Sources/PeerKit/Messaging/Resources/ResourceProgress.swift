import NIOConcurrencyHelpers

/// How far a resource transfer got, as seen by one side.
///
/// Both ``OutgoingResource/progress`` and ``IncomingResource/progress`` deliver these: the sender
/// counts bytes the receiver has taken, the receiver bytes its handler has read.
public struct ResourceProgress: Sendable, Hashable {
    /// Bytes transferred so far.
    public var bytesDone: Int64
    /// The resource's size, when the sender knew it in advance (a file; a sequence with a size).
    public var totalBytes: Int64?
    /// The average rate since the transfer started, in bytes per second.
    public var bytesPerSecond: Double
    /// Whether the transfer completed (the digest checked out).
    public var isFinished: Bool

    /// Creates a progress value.
    public init(bytesDone: Int64, totalBytes: Int64?, bytesPerSecond: Double, isFinished: Bool) {
        self.bytesDone = bytesDone
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.isFinished = isFinished
    }

    /// `bytesDone / totalBytes`, from 0 to 1, when the size is known.
    public var fractionCompleted: Double? {
        guard let totalBytes else { return nil }
        return totalBytes == 0 ? 1 : Double(bytesDone) / Double(totalBytes)
    }

    /// The time left at the current rate, when the size is known and the rate is not zero.
    public var estimatedTimeRemaining: Duration? {
        guard let totalBytes, bytesPerSecond > 0 else { return nil }
        return .seconds(Double(max(0, totalBytes - bytesDone)) / bytesPerSecond)
    }
}

/// Counts one side's bytes and publishes ``ResourceProgress`` values: to an `AsyncStream` that
/// keeps only the newest value, so a consumer that looks now and then never makes it buffer.
final class ProgressMeter: Sendable {
    let stream: AsyncStream<ResourceProgress>
    private let continuation: AsyncStream<ResourceProgress>.Continuation
    private let start = ContinuousClock.now
    private let counts: NIOLockedValueBox<(done: Int64, total: Int64?)>

    init(totalBytes: Int64?) {
        counts = NIOLockedValueBox((0, totalBytes))
        (stream, continuation) = AsyncStream.makeStream(of: ResourceProgress.self, bufferingPolicy: .bufferingNewest(1))
        continuation.yield(ResourceProgress(bytesDone: 0, totalBytes: totalBytes, bytesPerSecond: 0, isFinished: false))
    }

    /// The bytes done so far.
    var bytesDone: Int64 { counts.withLockedValue { $0.done } }

    /// The size became known (the sender learns it from its source once it starts).
    func setTotal(_ total: Int64?) {
        counts.withLockedValue { $0.total = total }
    }

    /// `count` more bytes are done.
    func advance(by count: Int) {
        let now = counts.withLockedValue { counts in
            counts.done += Int64(count)
            return counts
        }
        continuation.yield(progress(now, finished: false))
    }

    /// The transfer completed: the last value, then the end of the stream.
    func finish() {
        continuation.yield(progress(counts.withLockedValue { $0 }, finished: true))
        continuation.finish()
    }

    /// The transfer failed or was cancelled: the stream ends without a finished value.
    func abandon() {
        continuation.finish()
    }

    private func progress(_ counts: (done: Int64, total: Int64?), finished: Bool) -> ResourceProgress {
        let elapsed = (ContinuousClock.now - start)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(counts.done) / seconds : 0
        return ResourceProgress(bytesDone: counts.done, totalBytes: counts.total, bytesPerSecond: rate, isFinished: finished)
    }
}
