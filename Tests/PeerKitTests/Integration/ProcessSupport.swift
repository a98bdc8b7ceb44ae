import Foundation

// Child processes awaited without holding a thread of Swift's cooperative pool.
//
// The pool has one thread per core: two on the machine `make test` is sized for. A test that blocks
// one of them in `Process.waitUntilExit()`, `FileHandle.readDataToEndOfFile()` or `waitpid` leaves
// every test running beside it one thread, and two such tests at once leave them none. In one run
// of the whole suite the README snippet's test held a thread for 14 s in `waitUntilExit()`, and the
// Python client's and the openssl tests' held one for as long as their processes ran. What blocks
// here blocks a thread of its own.

/// The exit of a process started with ``Foundation/Process/runWatched()``.
struct ProcessExit: Sendable {
    fileprivate let status: Task<Int32, Never>

    /// Waits until the process has exited; its termination status.
    var value: Int32 {
        get async { await status.value }
    }
}

extension Process {
    /// Runs the process, and returns its exit to await (this takes its `terminationHandler`).
    func runWatched() throws -> ProcessExit {
        let (statuses, continuation) = AsyncStream.makeStream(of: Int32.self)
        terminationHandler = { process in
            continuation.yield(process.terminationStatus)
            continuation.finish()
        }
        do {
            try run()
        } catch {
            continuation.finish()
            throw error
        }
        return ProcessExit(status: Task { await statuses.first { _ in true } ?? -1 })
    }
}

extension FileHandle {
    /// Reads to the end of the stream on a thread of its own.
    func readToEndOnOwnThread() async -> Data {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.readDataToEndOfFile()) }.start()
        }
    }

    /// Reads one line (without its newline) on a thread of its own; what there was when the
    /// stream ended first.
    func readLineOnOwnThread() async -> String {
        await withCheckedContinuation { continuation in
            Thread {
                var bytes = Data()
                while true {
                    let byte = self.readData(ofLength: 1)
                    if byte.isEmpty || byte == Data("\n".utf8) { break }
                    bytes.append(byte)
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }.start()
        }
    }
}
