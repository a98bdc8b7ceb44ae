import Foundation
import PeerKit
#if canImport(Glibc)
import Glibc
#endif

/// The pre-shared key file listrd and listrctl share: where it is, reading it (refusing one that
/// others can read), and making it on first use.
///
/// The file holds 32 random bytes as 64 hexadecimal digits and a newline, mode 0600, in a folder
/// of mode 0700. Whichever of listrd and listrctl runs first on a machine creates it; the other
/// reads the same file. To let a listrctl on another machine in, copy the file there (scp keeps
/// it private).
public struct ListrKeyFile: Sendable {
    /// The environment variable that overrides the default path.
    public static let environmentVariable = "LISTR_KEY_FILE"

    /// The file's path.
    public let path: String

    /// A key file at `path` (not read until ``load()`` or ``loadOrCreate()``).
    public init(path: String) {
        self.path = path
    }

    /// `--key-file` when given, else `$LISTR_KEY_FILE`, else `$XDG_CONFIG_HOME/listr/key`, else
    /// `~/.config/listr/key`.
    public static func resolve(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> ListrKeyFile {
        if let option, !option.isEmpty { return ListrKeyFile(path: (option as NSString).expandingTildeInPath) }
        if let variable = environment[environmentVariable], !variable.isEmpty {
            return ListrKeyFile(path: (variable as NSString).expandingTildeInPath)
        }
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return ListrKeyFile(path: config + "/listr/key")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return ListrKeyFile(path: home + "/.config/listr/key")
    }

    /// Reads the key, creating the file with a new random key when there is none.
    /// Returns the key and whether it was created.
    public func loadOrCreate() throws(ListrKeyFileError) -> (key: PeerKey, created: Bool) {
        if FileManager.default.fileExists(atPath: path) {
            return (try load(), false)
        }
        let key = PeerKey.random()
        do {
            try create(with: key)
        } catch let error where error.isAlreadyExists {
            // Another process created it first: use its key.
            return (try load(), false)
        }
        return (key, true)
    }

    /// Reads the key, refusing (with a sentence) anything but a private key file of this user:
    ///
    /// - not a regular file (a folder, a FIFO, a device): ``ListrKeyFileError/notAFile(path:kind:)``;
    /// - readable or writable by group or others: ``ListrKeyFileError/tooOpen(path:mode:)``;
    /// - owned by another user than the effective one (root too may use only its own):
    ///   ``ListrKeyFileError/foreignOwner(path:owner:user:)``, since that user could change the
    ///   key or read it;
    /// - in a folder that another user could replace it in (writable by group or others without
    ///   the sticky bit, or owned by another user than this one or root):
    ///   ``ListrKeyFileError/unsafeFolder(path:folder:reason:)``;
    /// - larger than ``PeerKey/maximumFileBytes``: ``ListrKeyFileError/tooLarge(path:bytes:limit:)``,
    ///   before a byte of it is read.
    ///
    /// The file is opened once, without blocking (a FIFO does not wait for a writer), and checked
    /// with `fstat` on that descriptor, so what is checked is what is read.
    public func load() throws(ListrKeyFileError) -> PeerKey {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            let code = errno
            throw .unreadable(path: path, reason: code == EACCES
                ? "this user (uid \(geteuid())) may not read it (permission denied)"
                : String(cString: strerror(code)).lowercased())
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw .unreadable(path: path, reason: String(cString: strerror(errno)).lowercased())
        }
        if let kind = Self.kind(of: status.st_mode) {
            throw .notAFile(path: path, kind: kind)
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .tooOpen(path: path, mode: String(mode, radix: 8))
        }
        guard status.st_uid == geteuid() else {
            throw .foreignOwner(path: path, owner: status.st_uid, user: geteuid())
        }
        try checkFolder()
        guard Int(status.st_size) <= PeerKey.maximumFileBytes else {
            throw .tooLarge(path: path, bytes: Int64(status.st_size), limit: PeerKey.maximumFileBytes)
        }
        var bytes = [UInt8](repeating: 0, count: PeerKey.maximumFileBytes + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress.map { $0 + count }, buffer.count - count)
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path: path, reason: String(cString: strerror(errno)).lowercased())
            }
            if got == 0 { break }
            count += got
        }
        guard count <= PeerKey.maximumFileBytes else {
            throw .tooLarge(path: path, bytes: Int64(count), limit: PeerKey.maximumFileBytes)
        }
        do {
            return try PeerKey(fileContents: Data(bytes.prefix(count)))
        } catch {
            throw .invalid(path: path, reason: "\(error.reason ?? error.description) (in \(path))")
        }
    }

    /// Refuses a key file whose folder lets another user replace it: writable by group or others
    /// without the sticky bit (with it, as in /tmp, only the file's owner may remove or rename
    /// it), or owned by another user than this one and root. The folder is that of the file the
    /// path leads to, symbolic links followed.
    private func checkFolder() throws(ListrKeyFileError) {
        let real = realpath(path, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        } ?? path
        let folder = (real as NSString).deletingLastPathComponent
        var status = stat()
        guard stat(folder.isEmpty ? "." : folder, &status) == 0 else { return }  // the file was opened through it
        let mode = status.st_mode & 0o7777
        if mode & 0o022 != 0, mode & S_ISVTX == 0 {
            throw .unsafeFolder(path: path, folder: folder, reason: "its mode is \(String(mode & 0o777, radix: 8)), so other users may replace files in it")
        }
        if status.st_uid != geteuid(), status.st_uid != 0 {
            throw .unsafeFolder(path: path, folder: folder, reason: "it belongs to another user (uid \(status.st_uid)), who may replace files in it")
        }
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

    private func create(with key: PeerKey) throws(ListrKeyFileError) {
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .cannotCreate(path: path, reason: ListrError.reason(forFileError: error), errno: 0)
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let code = errno
            throw .cannotCreate(path: path, reason: String(cString: strerror(code)).lowercased(), errno: code)
        }
        defer { close(descriptor) }
        let text = Array((key.hexEncodedSecret + "\n").utf8)
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(descriptor) == 0 else {
            let code = errno
            unlink(path)
            throw .cannotCreate(path: path, reason: String(cString: strerror(code)).lowercased(), errno: code)
        }
    }
}

/// Why the key file cannot be used.
public enum ListrKeyFileError: Error, Sendable, CustomStringConvertible {
    /// The file exists but cannot be read.
    case unreadable(path: String, reason: String)
    /// Group or others may read the file.
    case tooOpen(path: String, mode: String)
    /// The file does not hold a key.
    case invalid(path: String, reason: String)
    /// The file could not be created.
    case cannotCreate(path: String, reason: String, errno: Int32)
    /// The path names a folder, a FIFO, a device or a socket rather than a file.
    case notAFile(path: String, kind: String)
    /// The file is larger than a key file can be (``PeerKey/maximumFileBytes``); it was not read.
    case tooLarge(path: String, bytes: Int64, limit: Int)
    /// Another user owns the file.
    case foreignOwner(path: String, owner: uid_t, user: uid_t)
    /// The file's folder lets another user replace the file.
    case unsafeFolder(path: String, folder: String, reason: String)

    var isAlreadyExists: Bool {
        if case let .cannotCreate(_, _, code) = self { return code == EEXIST }
        return false
    }

    /// The problem as a sentence that says what to do.
    public var description: String {
        switch self {
        case let .unreadable(path, reason):
            return "The key file \(path) cannot be read: \(reason). Give another with --key-file PATH or LISTR_KEY_FILE, or run with --insecure to use no key (plaintext)."
        case let .tooOpen(path, mode):
            return "The key file \(path) has mode \(mode), so other users can read the key; it is not used. Run \"chmod 600 \(path)\", and make a new key (delete the file) if others may have read it."
        case let .invalid(path, reason):
            return "The key file \(path) does not hold a key: \(reason)"
        case let .notAFile(path, kind):
            return "The key file \(path) is \(kind), not a file, so no key was read from it. Give the path of the key file (64 hexadecimal digits) with --key-file PATH or LISTR_KEY_FILE, or remove what is there to have a new key made."
        case let .tooLarge(path, bytes, limit):
            return "The key file \(path) is \(bytes) bytes long, and a key file is at most \(limit) bytes (64 hexadecimal digits and a line break), so it was not read. Check that --key-file or LISTR_KEY_FILE names the key file."
        case let .foreignOwner(path, owner, user):
            return "The key file \(path) belongs to another user (uid \(owner)) than the one running this program (uid \(user)), who could read or change the key; it is not used. Use a key file of your own (copy it, then chmod 600), or run as its owner."
        case let .unsafeFolder(path, folder, reason):
            return "The key file \(path) is in the folder \(folder), and \(reason); it is not used, since another user could put their key in its place. Run \"chmod go-w \(folder)\", or keep the key in a folder of your own."
        case let .cannotCreate(path, reason, _):
            return "The key file \(path) could not be created: \(reason). Give another path with --key-file PATH or LISTR_KEY_FILE."
        }
    }
}
