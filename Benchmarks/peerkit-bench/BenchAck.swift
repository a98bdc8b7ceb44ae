/// Flow control for one-way runs: the receiver acknowledges every `ackEvery` messages so the
/// sender never has more than a window of messages queued (memory stays bounded for 4 MiB runs).
struct BenchAck: Codable, Sendable {
    /// The highest `seq` received, or ``BenchPayload/endOfRun`` once the run is over.
    var seq: Int
}
