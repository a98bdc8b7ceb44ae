import Foundation
import NIOConcurrencyHelpers

/// Writes one JSON object per line to standard output, each with `t`, the seconds since start.
///
/// When standard output goes away (the reader closed the pipe), `onClosed` is called once, so the
/// node can stop gracefully instead of dying of SIGPIPE.
final class JSONLines: Sendable {
    private let start = ContinuousClock.now
    private let closed = NIOLockedValueBox(false)
    private let onClosed: @Sendable () -> Void

    init(onClosed: @escaping @Sendable () -> Void) {
        self.onClosed = onClosed
        signal(SIGPIPE, SIG_IGN)
    }

    func write(_ object: [String: Any]) {
        var object = object
        let elapsed = ContinuousClock.now - start
        object["t"] = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        let failed = closed.withLockedValue { closed -> Bool in
            guard !closed else { return false }
            do {
                try FileHandle.standardOutput.write(contentsOf: data + Data("\n".utf8))
                return false
            } catch {
                closed = true
                return true
            }
        }
        if failed { onClosed() }
    }
}
