import Foundation
import PeerKit
#if canImport(Glibc)
import Glibc
#endif

/// A one-line progress bar on standard error for a transfer: bytes, rate and time left.
///
/// Drawn only when standard error is a terminal and output is not `--json`; otherwise it prints
/// nothing at all, so pipes and scripts see exactly what they saw before.
struct ProgressBar: Sendable {
    /// Whether anything is drawn.
    let enabled: Bool

    /// A bar that draws only on a terminal, never with `--json`.
    init(json: Bool) {
        enabled = !json && isatty(STDERR_FILENO) == 1
    }

    /// Draws `progress` (at most ten times a second) until the stream ends, then clears the line.
    func follow(_ progress: AsyncStream<ResourceProgress>, label: String) -> Task<Void, Never> {
        guard enabled else { return Task {} }
        return Task {
            var lastDrawn = ContinuousClock.now - .seconds(1)
            for await step in progress {
                let now = ContinuousClock.now
                if now - lastDrawn < .milliseconds(100), !step.isFinished { continue }
                lastDrawn = now
                Self.draw(Self.line(step, label: label))
            }
            Self.draw("")
        }
    }

    /// The bar's text: `Receiving [#########-----------]  12.0 MiB / 64.0 MiB  45.3 MB/s  0:02 left`.
    static func line(_ step: ResourceProgress, label: String) -> String {
        var text = label
        if let fraction = step.fractionCompleted {
            let width = 24
            let filled = min(width, max(0, Int((fraction * Double(width)).rounded(.down))))
            text += " [" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
        }
        text += "  " + bytes(step.bytesDone)
        if let total = step.totalBytes { text += " / " + bytes(total) }
        text += "  " + String(format: "%.1f MB/s", step.bytesPerSecond / 1e6)
        if let left = step.estimatedTimeRemaining {
            let seconds = Int(left.components.seconds)
            text += "  " + String(format: "%d:%02d left", seconds / 60, seconds % 60)
        }
        return text
    }

    private static func bytes(_ count: Int64) -> String {
        String(format: "%.1f MiB", Double(count) / 1_048_576)
    }

    private static func draw(_ text: String) {
        // Carriage return, the text, then erase to the end of the line.
        FileHandle.standardError.write(Data(("\r" + text + "\u{1B}[K").utf8))
    }
}
