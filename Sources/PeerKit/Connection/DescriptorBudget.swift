#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How many connections the process's file-descriptor limit leaves room for.
///
/// Every connection holds one descriptor. A listener that runs out of descriptors cannot even
/// accept a connection to close it: `accept` fails with EMFILE while the connection waits in the
/// backlog, and the event loop is woken for it again and again. So the connection cap is kept
/// below what the limit allows (``reserve`` descriptors stay free for accepting, files and the
/// discovery client), and connections over the cap are accepted and closed at once instead.
struct DescriptorBudget: Equatable, Sendable {
    /// Descriptors kept free beyond those already open when listening starts.
    static let reserve = 16

    /// The soft limit (`ulimit -n`).
    var limit: Int
    /// The descriptors open when it was measured.
    var open: Int

    /// How many connections fit: the limit minus what is open minus ``reserve``, at least 1.
    var connections: Int { max(1, limit - open - Self.reserve) }

    /// The process's budget now, or nil when the limit is unlimited or cannot be read.
    static func current() -> DescriptorBudget? {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0, limits.rlim_cur != rlim_t.max else { return nil }
        let limit = Int(clamping: limits.rlim_cur)
        return DescriptorBudget(limit: limit, open: openDescriptors(below: limit))
    }

    /// The number of open descriptors: the entries of /proc/self/fd (Linux), else a probe of
    /// every descriptor below `limit` with fcntl(F_GETFD).
    private static func openDescriptors(below limit: Int) -> Int {
        if let directory = opendir("/proc/self/fd") {
            defer { closedir(directory) }
            var count = 0
            while let entry = readdir(directory) {
                if !isDotOrDotDot(entry) { count += 1 }
            }
            // The directory's own descriptor was open while counting.
            return max(0, count - 1)
        }
        return (0..<min(limit, 65_536)).reduce(0) { count, fd in fcntl(Int32(fd), F_GETFD) == -1 ? count : count + 1 }
    }

    /// Whether the directory entry `entry` (from `readdir`) is "." or "..".
    ///
    /// The name is read in place, a byte at a time and no further than its terminating zero.
    /// `readdir` returns records only as long as their names (`d_reclen`), not the whole
    /// `struct dirent`: reading `entry.pointee.d_name`, a 256-byte array, copies bytes past the end
    /// of a short record, and when the record ends a page, from a page that is not mapped (a test
    /// run crashed there, in `ConnectionManager.start()`).
    static func isDotOrDotDot(_ entry: UnsafePointer<dirent>) -> Bool {
        // Every dirent has its name; were the offset unknown, "." and ".." would count as open
        // descriptors, which only makes the budget 2 smaller.
        guard let offset = MemoryLayout<dirent>.offset(of: \.d_name) else { return false }
        let name = UnsafeRawPointer(entry).advanced(by: offset).assumingMemoryBound(to: UInt8.self)
        let dot = UInt8(ascii: ".")
        return name[0] == dot && (name[1] == 0 || (name[1] == dot && name[2] == 0))
    }
}
