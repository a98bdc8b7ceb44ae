#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive advisory lock on a store, held while a daemon serves it, so that two daemons
/// never write one store and lose each other's changes.
///
/// It is an `flock(2)` on `<store>.lock`; the kernel releases it when the process ends, however
/// it ends, so a killed daemon never leaves a stale lock behind.
public final class StoreLock: Sendable {
    /// The lock file's path.
    public let path: String
    private let descriptor: Int32

    /// Takes the lock for the store at `storePath`, or throws ``ListrError/storeInUse(path:)``
    /// when another process holds it.
    public init(storePath: String) throws(ListrError) {
        let path = storePath + ".lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw .storeUnreadable(path: storePath, reason: "its lock file \(path) cannot be opened (\(String(cString: strerror(errno))))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(descriptor)
            if code == EWOULDBLOCK { throw .storeInUse(path: storePath) }
            throw .storeUnreadable(path: storePath, reason: "its lock file \(path) cannot be locked (\(String(cString: strerror(code))))")
        }
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)  // releases the lock
    }
}
