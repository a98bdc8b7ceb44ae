import Foundation
import NIOConcurrencyHelpers

/// Writes one JSON object per line to standard output, each with `t`, the seconds since start.
final class JSONLines: Sendable {
    private let start = ContinuousClock.now
    private let lock = NIOLock()

    func write(_ object: [String: Any]) {
        var object = object
        let elapsed = ContinuousClock.now - start
        object["t"] = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        lock.withLock {
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        }
    }
}
