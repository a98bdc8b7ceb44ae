import Foundation

/// Writes the JSON lines the harness reads: one object per line, flushed at once.
enum Report {
    /// Prints `value` as one line of JSON on stdout and flushes it.
    static func emit<T: Encodable>(_ value: T) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            let data = try encoder.encode(value)
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        } catch {
            fail("The result could not be encoded as JSON: \(error).")
        }
    }

    /// Prints `message` on stderr and exits with status 1.
    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("peerkit-bench: \(message)\n".utf8))
        exit(1)
    }
}
