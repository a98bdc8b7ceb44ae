import Foundation

/// Standard input, read on its own thread.
enum StandardInput {
    /// Returns when standard input reaches its end: the harness closes it to end a process.
    static func waitForEnd() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                while let _ = readLine(strippingNewline: true) {}
                continuation.resume()
            }
        }
    }
}
