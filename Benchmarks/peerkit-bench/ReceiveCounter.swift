import PeerKit
import Synchronization

/// Counts the messages of one one-way run on one receiver, from the first message to the end
/// marker, and acknowledges every `ackEvery` messages to the sender (flow control).
final class ReceiveCounter: Sendable {
    /// What one receiver measured.
    struct Result: Encodable {
        let messages: Int
        let bytes: Int
        let seconds: Double
        let msgsPerSec: Double
        let MBps: Double
    }

    private struct State {
        var messages = 0
        var bytes = 0
        var first: ContinuousClock.Instant?
        var continuation: CheckedContinuation<Result, Never>?
        var result: Result?
    }

    private let state = Mutex(State())
    private let ackEvery: Int

    /// A counter that acknowledges every `ackEvery` messages (0: never, but at the end).
    init(ackEvery: Int) {
        self.ackEvery = ackEvery
    }

    /// Registers the counting handler on `transceiver`, for payloads of type `Payload`.
    func install<Payload: BenchMessage>(on transceiver: PeerTransceiver, receiving: Payload.Type) {
        transceiver.receive(Payload.self) { [self] payload, sender in
            let (ack, result) = record(payload)
            if let ack {
                do {
                    try await transceiver.send(BenchAck(seq: ack), to: [sender])
                } catch {
                    Report.fail("The acknowledgement to \(sender) could not be sent: \(error)")
                }
            }
            if let result {
                finish(result)
            }
        }
    }

    /// How many messages arrived so far.
    var messagesSoFar: Int {
        state.withLock { $0.messages }
    }

    /// Waits for the end marker and returns what was measured.
    func result() async -> Result {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result? in
                if let result = state.result { return result }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Counts `payload`; returns the `seq` to acknowledge, if any, and the result once the run ends.
    private func record(_ payload: some BenchMessage) -> (ack: Int?, result: Result?) {
        let now = ContinuousClock.now
        return state.withLock { state in
            if state.first == nil { state.first = now }
            if payload.seq == BenchPayload.endOfRun {
                let seconds = now.seconds(since: state.first ?? now)
                let result = Result(messages: state.messages, bytes: state.bytes, seconds: seconds,
                                    msgsPerSec: Double(state.messages) / seconds,
                                    MBps: Double(state.bytes) / seconds / 1e6)
                return (BenchPayload.endOfRun, result)
            }
            state.messages += 1
            state.bytes += payload.nominalSize
            let ack = ackEvery > 0 && state.messages % ackEvery == 0 ? payload.seq : nil
            return (ack, nil)
        }
    }

    private func finish(_ result: Result) {
        let continuation = state.withLock { state in
            state.result = result
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: result)
    }
}
