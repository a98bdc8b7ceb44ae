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

    /// Reads the key; refuses a file that is not private to its owner.
    public func load() throws(ListrKeyFileError) -> PeerKey {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw .unreadable(path: path, reason: String(cString: strerror(errno)).lowercased())
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .tooOpen(path: path, mode: String(mode, radix: 8))
        }
        do {
            return try PeerKey(contentsOfFile: path)
        } catch {
            throw .invalid(path: path, reason: error.description)
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
        case let .cannotCreate(path, reason, _):
            return "The key file \(path) could not be created: \(reason). Give another path with --key-file PATH or LISTR_KEY_FILE."
        }
    }
}
