import Dispatch
import Foundation

/// Waits for SIGINT or SIGTERM, or for `seconds` when given: how `browse` and `tail` end.
enum StopSignal {
    static func wait(seconds: Double?) async {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        let sources = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        let timer = seconds.map { seconds in
            Task {
                try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                continuation.yield()
            }
        }
        defer { timer?.cancel() }
        for await _ in stream { return }
    }
}
