import Logging
import NIOConcurrencyHelpers

/// Keeps every line a `Logger` writes, so that a test can count log lines per episode and check
/// that untrusted text cannot break a line.
final class CapturedLog: Sendable {
    private let lines = NIOLockedValueBox<[(level: Logger.Level, text: String)]>([])

    /// A logger that writes into this capture, at every level.
    var logger: Logger {
        Logger(label: "PeerKit adversarial test") { _ in Handler(log: self) }
    }

    /// The messages logged at `level` or above.
    func messages(atLeast level: Logger.Level = .trace) -> [String] {
        lines.withLockedValue { $0.filter { $0.level >= level }.map(\.text) }
    }

    /// The messages logged at `level` or above that contain `fragment`.
    func messages(containing fragment: String, atLeast level: Logger.Level = .trace) -> [String] {
        messages(atLeast: level).filter { $0.contains(fragment) }
    }

    /// Waits until a message containing `fragment` was logged, for at most `seconds`; returns
    /// whether one was (the log line may come just after the event it belongs to).
    func waitForMessage(containing fragment: String, within seconds: Double = 10) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if !messages(containing: fragment).isEmpty { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return !messages(containing: fragment).isEmpty
    }

    fileprivate func append(_ level: Logger.Level, _ text: String) {
        lines.withLockedValue { $0.append((level, text)) }
    }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.append(event.level, event.message.description)
        }
    }
}
