#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Crash-safe file replacement with POSIX calls: write a temporary file, fsync it, rename it over
/// the target, fsync the folder.
enum DurableFile {
    /// A failed system call, as a clause: `"fsync of /tmp/x failed: Input/output error"`.
    struct Failure: Error, CustomStringConvertible {
        var description: String

        init(_ call: String, _ path: String, errno code: Int32 = errno) {
            description = "\(call) of \(path) failed: \(String(cString: strerror(code)))"
        }
    }

    /// Replaces the file at `path` with `data`. When it throws, the file at `path` is either
    /// untouched or (only when the final folder fsync fails) already replaced but possibly not
    /// yet durable.
    static func replace(_ path: String, with data: Data) throws(Failure) {
        let directory = (path as NSString).deletingLastPathComponent
        let folder = directory.isEmpty ? "." : directory
        let name = (path as NSString).lastPathComponent
        let temporary = (folder as NSString).appendingPathComponent(".\(name).\(UUID().uuidString).tmp")

        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Failure("creating the temporary file", temporary) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(descriptor) }
            try writeAll(data, to: descriptor, path: temporary)
            guard fsync(descriptor) == 0 else { throw Failure("fsync", temporary) }
        }
        guard rename(temporary, path) == 0 else { throw Failure("rename to \(path)", temporary) }
        renamed = true
        try syncDirectory(folder)
    }

    private static func writeAll(_ data: Data, to descriptor: Int32, path: String) throws(Failure) {
        let failure: Failure? = data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return nil }  // empty data: nothing to write
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return Failure("write", path)
                }
                offset += written
            }
            return nil
        }
        if let failure { throw failure }
    }

    private static func syncDirectory(_ path: String) throws(Failure) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure("opening the folder", path) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Failure("fsync", path) }
    }
}
