import Foundation

/// This process's resident memory, from /proc/self/status (Linux).
enum ProcessMemory {
    /// Resident set size now (`VmRSS`), in bytes; 0 where /proc is missing.
    static var residentBytes: Int { field("VmRSS") }
    /// Peak resident set size so far (`VmHWM`), in bytes; 0 where /proc is missing.
    static var peakResidentBytes: Int { field("VmHWM") }

    private static func field(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.split(separator: " ").dropFirst().first { Int($0) != nil }
            return (digits.flatMap { Int($0) } ?? 0) * 1024
        }
        return 0
    }
}

/// What the resource sink reports when asked, at the end of a run.
struct ResourceSinkReport: Codable, Sendable {
    var bytes: Int64
    var rssBeforeBytes: Int
    var peakRSSBytes: Int
}

/// Asks the resource sink for its ``ResourceSinkReport``.
struct ResourceSinkQuery: Codable, Sendable {}
