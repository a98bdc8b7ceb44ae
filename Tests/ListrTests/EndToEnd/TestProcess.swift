import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process started by a test with Foundation's `Process`: its output is collected as it
/// comes, and it is ended by its PID.
final class TestProcess: Sendable {
    /// How a process ended.
    enum Exit: Equatable, CustomStringConvertible {
        case status(Int32)
        case signal(Int32)

        var description: String {
            switch self {
            case let .status(code): "exit status \(code)"
            case let .signal(signal): "signal \(signal)"
            }
        }
    }

    /// What a finished process left.
    struct Result: CustomStringConvertible {
        var exit: Exit
        var stdout: String
        var stderr: String

        var description: String { "\(exit); stdout: \(stdout.debugDescription); stderr: \(stderr.debugDescription)" }
    }

    private struct State {
        var stdout = Data()
        var stderr = Data()
        var openStreams = 2
        var exit: Exit?
        var pid: Int32 = 0
    }

    /// A short name for messages, e.g. "listrd A".
    let name: String
    private let state = Mutex(State())

    private init(name: String) {
        self.name = name
    }

    /// The child's process ID.
    var pid: Int32 { state.withLock { $0.pid } }

    /// The user processes run as when the tests run as root: nobody, group nogroup.
    static let unprivilegedUser = (name: "nobody", group: "nogroup")

    /// Whether the tests run as root, in which case every process they start runs as
    /// ``unprivilegedUser`` (through `setpriv`): as root, permission checks (a read-only store)
    /// would test nothing, and a test must not run the programs with more rights than a user has.
    static var dropsPrivileges: Bool { getuid() == 0 }

    /// The uid and gid of ``unprivilegedUser``, looked up once: `getpwnam` and `getgrnam` return
    /// static buffers, which tests running in parallel would overwrite under each other.
    static let unprivilegedIDs: (uid: uid_t, gid: gid_t)? = {
        guard let user = getpwnam(unprivilegedUser.name), let group = getgrnam(unprivilegedUser.group) else { return nil }
        return (user.pointee.pw_uid, group.pointee.gr_gid)
    }()

    /// Starts `executable` with `arguments` and this process's environment plus `environment`;
    /// standard input is /dev/null. When the tests run as root, it runs as nobody:nogroup with no
    /// supplementary groups (`setpriv --reuid=nobody --regid=nogroup --clear-groups`); setpriv execs
    /// it, so the PID is the program's.
    static func launch(_ executable: URL, _ arguments: [String], name: String, environment: [String: String] = [:]) throws -> TestProcess {
        let process = Process()
        if dropsPrivileges {
            let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")
            guard FileManager.default.isExecutableFile(atPath: setpriv.path) else {
                throw TestFailure("The tests run as root, so they start programs as nobody through /usr/bin/setpriv, which is missing. Install util-linux (scripts/bootstrap does).")
            }
            process.executableURL = setpriv
            process.arguments = [
                "--reuid=\(unprivilegedUser.name)", "--regid=\(unprivilegedUser.group)", "--clear-groups", "--",
                executable.path,
            ] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, override in override }
        process.standardInput = FileHandle.nullDevice
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr

        let child = TestProcess(name: name)
        process.terminationHandler = { process in
            let exit: Exit = process.terminationReason == .uncaughtSignal
                ? .signal(process.terminationStatus)
                : .status(process.terminationStatus)
            child.state.withLock { $0.exit = exit }
        }
        try process.run()
        let pid = process.processIdentifier
        child.state.withLock { $0.pid = pid }
        child.read(stdout.fileHandleForReading, into: \.stdout)
        child.read(stderr.fileHandleForReading, into: \.stderr)
        return child
    }

    /// Reads `handle` to its end on a thread of its own. (Not `readabilityHandler`: on Linux its
    /// dispatch sources can miss the end of a stream or crash when reset from the handler.)
    private func read(_ handle: FileHandle, into stream: WritableKeyPath<State, Data> & Sendable) {
        let thread = Thread { [self] in
            while true {
                let data = handle.availableData  // blocks until data or the end of the stream
                if data.isEmpty { break }
                state.withLock { $0[keyPath: stream].append(data) }
            }
            state.withLock { $0.openStreams -= 1 }
        }
        thread.name = "\(name) output"
        thread.start()
    }

    /// Everything written to standard output so far.
    var stdout: String { state.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    /// Everything written to standard error so far.
    var stderr: String { state.withLock { String(decoding: $0.stderr, as: UTF8.self) } }
    /// How the process ended, once it has and its output is read to the end.
    var exit: Exit? { state.withLock { $0.openStreams == 0 ? $0.exit : nil } }

    /// Sends `signal` to the process, unless it has already ended.
    func send(_ signal: Int32) {
        let (running, pid) = state.withLock { ($0.exit == nil, $0.pid) }
        if running, pid > 0 { kill(pid, signal) }
    }

    /// Waits until `condition` holds for the output, or throws after `timeout`, or as soon as
    /// the process ends without it holding.
    func waitFor(_ what: String, timeout: Duration, _ condition: (_ stdout: String, _ stderr: String) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (stdout, stderr, exit) = (self.stdout, self.stderr, self.exit)
            if condition(stdout, stderr) { return }
            if let exit {
                throw TestFailure("\(name) ended (\(exit)) before \(what). stderr:\n\(stderr)")
            }
            if ContinuousClock.now > deadline {
                throw TestFailure("\(name) did not get to \(what) within \(timeout). stderr:\n\(stderr)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits for the process to end; after `timeout` it is killed and this throws.
    @discardableResult
    func waitForExit(timeout: Duration) async throws -> Result {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let exit { return Result(exit: exit, stdout: stdout, stderr: stderr) }
            if ContinuousClock.now > deadline {
                send(SIGKILL)
                let (exit, open) = state.withLock { ($0.exit, $0.openStreams) }
                throw TestFailure("\(name) did not end within \(timeout) and was killed (it had \(exit.map { "ended with \($0)" } ?? "not ended"), \(open) output stream(s) open). stderr:\n\(stderr)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// A test failure with a sentence saying what went wrong.
struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
