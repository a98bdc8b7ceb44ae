import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads a small configuration file (a key, a certificate) without trusting what is at its path.
///
/// The path may name anything: a 1 GiB file, a FIFO that never ends, a folder, a device. The file
/// is opened once (non-blocking, so that opening a FIFO does not wait for a writer), examined with
/// `fstat` on that descriptor (so what is checked is what is read), refused unless it is a regular
/// file of at most `maximumBytes`, and read up to one byte more than that (a file that grows
/// meanwhile is refused too). Failures are clauses for the caller's sentence: "it is a FIFO (a
/// named pipe), not a file", "it is 1073741824 bytes long, and a key file is at most 512".
enum SmallFile {
    /// Why a file was not read, as a clause.
    struct Problem: Error {
        let reason: String
    }

    /// What was read, and the file's status (owner, mode) from the same descriptor.
    struct Contents {
        let bytes: [UInt8]
        let status: stat
    }

    /// Reads the regular file at `path` if it holds at most `maximumBytes`; `what` names it in
    /// the reasons ("a key file").
    static func read(_ path: String, maximumBytes: Int, what: String) throws(Problem) -> Contents {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else { throw Problem(reason: openFailure(errno)) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw Problem(reason: String(cString: strerror(errno)).lowercased())
        }
        if let kind = kind(of: status.st_mode) {
            throw Problem(reason: "it is \(kind), not a file; give the path of \(what)")
        }
        if Int(status.st_size) > maximumBytes {
            throw Problem(reason: "it is \(status.st_size) bytes long, and \(what) is at most \(maximumBytes) bytes, so it was not read")
        }
        var bytes = [UInt8](repeating: 0, count: maximumBytes + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(descriptor, buffer.baseAddress.map { $0 + count }, buffer.count - count)
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw Problem(reason: String(cString: strerror(errno)).lowercased())
            }
            if got == 0 { break }
            count += got
        }
        guard count <= maximumBytes else {
            throw Problem(reason: "it holds more than \(maximumBytes) bytes (it grew while it was read), and \(what) is at most \(maximumBytes) bytes")
        }
        return Contents(bytes: Array(bytes.prefix(count)), status: status)
    }

    /// "a folder", "a FIFO (a named pipe)"…; nil for a regular file.
    static func kind(of mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: nil
        case S_IFDIR: "a folder"
        case S_IFIFO: "a FIFO (a named pipe)"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        default: "not a regular file"
        }
    }

    /// The clause for `open`'s `errno`.
    static func openFailure(_ code: Int32) -> String {
        switch code {
        case ENOENT: "there is no such file"
        case EACCES: "this user (uid \(geteuid())) may not read it (permission denied)"
        default: String(cString: strerror(code)).lowercased()
        }
    }
}
