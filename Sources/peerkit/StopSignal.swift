import Dispatch
import Foundation

/// Waits for SIGINT or SIGTERM, for `seconds` when given, or for `done` to yield when given:
/// how `browse` and `tail` end.
enum StopSignal {
    static func wait(seconds: Double?, orUntil done: AsyncStream<Void>? = nil) async {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        let finished = done.map { done in
            Task {
                for await _ in done {
                    continuation.yield()
                    return
                }
            }
        }
        defer { finished?.cancel() }
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
