import Foundation
import ListrKit
import PeerKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What is at a key file's path is not trusted: a huge file, a FIFO, a folder, another user's
/// file or a file in a folder others can write are refused with a sentence, never read whole.
@Suite("Key files: read at most a few hundred bytes, and only a private file of this user", .timeLimit(.minutes(1)))
final class ListrKeyFileTests {
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "listr-key-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    deinit {
        chmod(folder, 0o700)
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func path(_ name: String) -> String { folder + "/" + name }

    /// Writes a valid key file of mode 0600 at `path`.
    private func writeKey(_ path: String) throws {
        try Data((String(repeating: "ab", count: 32) + "\n").utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
    }

    @Test("a private key file of this user in a private folder is read")
    func validKey() throws {
        let key = path("key")
        try writeKey(key)
        #expect(try ListrKeyFile(path: key).load() == PeerKey(bytes: [UInt8](repeating: 0xAB, count: 32)))
        #expect(try PeerKey(contentsOfFile: key) == PeerKey(bytes: [UInt8](repeating: 0xAB, count: 32)))
    }

    @Test("a 1 GiB key file is refused with its size, at once, without being read")
    func hugeFile() throws {
        let key = path("key")
        let descriptor = open(key, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        #expect(descriptor >= 0)
        #expect(ftruncate(descriptor, 1 << 30) == 0)  // sparse: 1 GiB long, no disk used
        close(descriptor)
        let started = ContinuousClock.now
        #expect(throws: ListrKeyFileError.self) { try ListrKeyFile(path: key).load() }
        do {
            _ = try ListrKeyFile(path: key).load()
        } catch {
            #expect(error.description == "The key file \(key) is 1073741824 bytes long, and a key file is at most 512 bytes (64 hexadecimal digits and a line break), so it was not read. Check that --key-file or LISTR_KEY_FILE names the key file.")
        }
        do {
            _ = try PeerKey(contentsOfFile: key)
            Issue.record("PeerKey read a 1 GiB key file")
        } catch {
            #expect(error.reason == "the key file \(key) cannot be used: it is 1073741824 bytes long, and a key file is at most 512 bytes, so it was not read")
        }
        #expect(ContinuousClock.now - started < .seconds(1), "reading 1 GiB takes longer than refusing it")
    }

    @Test("a FIFO is reported as a FIFO, without waiting for a writer")
    func fifo() throws {
        let key = path("key")
        #expect(mkfifo(key, 0o600) == 0)
        do {
            _ = try ListrKeyFile(path: key).load()
            Issue.record("a FIFO was read as a key file")
        } catch {
            #expect(error.description.hasPrefix("The key file \(key) is a FIFO (a named pipe), not a file, so no key was read from it."))
        }
        do {
            _ = try PeerKey(contentsOfFile: key)
            Issue.record("PeerKey read a FIFO")
        } catch {
            #expect(error.reason == "the key file \(key) cannot be used: it is a FIFO (a named pipe), not a file; give the path of a key file")
        }
    }

    @Test("a folder is reported as a folder, not as a permission or Cocoa error")
    func directory() throws {
        let key = path("key")
        try FileManager.default.createDirectory(atPath: key, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        do {
            _ = try ListrKeyFile(path: key).load()
            Issue.record("a folder was read as a key file")
        } catch {
            #expect(error.description.hasPrefix("The key file \(key) is a folder, not a file, so no key was read from it."))
            #expect(!error.description.contains("permission"))
            #expect(!error.description.contains("NSCocoaErrorDomain"))
        }
        do {
            _ = try PeerKey(contentsOfFile: key)
            Issue.record("PeerKey read a folder")
        } catch {
            #expect(error.reason == "the key file \(key) cannot be used: it is a folder, not a file; give the path of a key file")
        }
    }

    @Test("a key file that another user owns is refused, also for root", .enabled(if: geteuid() == 0, "chown to another user needs root"))
    func foreignOwner() throws {
        let key = path("key")
        try writeKey(key)
        #expect(chown(key, 65534, 65534) == 0)
        do {
            _ = try ListrKeyFile(path: key).load()
            Issue.record("another user's key file was used")
        } catch {
            #expect(error.description.hasPrefix("The key file \(key) belongs to another user (uid 65534) than the one running this program (uid 0), who could read or change the key; it is not used."))
        }
    }

    @Test("a key file in a folder that others can write is refused; with the sticky bit (as /tmp) it is used")
    func writableFolder() throws {
        let key = path("key")
        try writeKey(key)
        #expect(chmod(folder, 0o777) == 0)
        do {
            _ = try ListrKeyFile(path: key).load()
            Issue.record("a key file in a world-writable folder was used")
        } catch {
            #expect(error.description == "The key file \(key) is in the folder \(folder), and its mode is 777, so other users may replace files in it; it is not used, since another user could put their key in its place. Run \"chmod go-w \(folder)\", or keep the key in a folder of your own.")
        }
        #expect(chmod(folder, 0o1777) == 0)
        #expect(throws: Never.self) { try ListrKeyFile(path: key).load() }
        #expect(chmod(folder, 0o770) == 0)
        #expect(throws: ListrKeyFileError.self) { try ListrKeyFile(path: key).load() }
    }
}
