import Foundation
import PeerKit
import Testing

/// Helpers for the tests that talk to the real avahi-daemon started by `scripts/avahi-up`.
enum AvahiTestSupport {
    struct DaemonMissing: Error, CustomStringConvertible {
        var detail: String
        var description: String {
            "No avahi-daemon answers on the D-Bus system bus (\(detail)). Run scripts/avahi-up (make test does) to start one restricted to loopback."
        }
    }

    /// A service type no other test uses: "t" and 8 random lowercase letters or digits.
    static func randomServiceType() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return "t" + String((0..<8).map { _ in alphabet.randomElement() ?? "x" })
    }

    /// A request as a transceiver would make it.
    static func request(serviceType: String, name: String, port: Int?, info: [String: String] = [:]) -> DiscoveryRequest {
        let peerID = UUID().uuidString.lowercased()
        return DiscoveryRequest(serviceType: serviceType, peerID: peerID, peerName: name, port: port,
                                txtRecord: info.merging(["peerid": peerID, "proto": "1"]) { $1 })
    }

    /// Throws ``DaemonMissing`` unless `avahi-browse -at` reaches a daemon.
    static func requireDaemon() async throws {
        let result = try await Command.run("/usr/bin/timeout", ["10", "avahi-browse", "-at"])
        guard result.status == 0 else {
            throw DaemonMissing(detail: "avahi-browse -at exited with status \(result.status): \(result.standardError.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
    }

    /// The resolved lines of `avahi-browse -rpt _<type>._tcp`, split into fields, polled until
    /// `accept` takes them or `timeout` passes.
    static func browseResolved(serviceType: String, timeout: Duration = .seconds(20),
                               until accept: ([[String]]) -> Bool) async throws -> [[String]] {
        let deadline = ContinuousClock.now + timeout
        var lines: [[String]] = []
        repeat {
            let result = try await Command.run("/usr/bin/timeout", ["10", "avahi-browse", "-rpt", "_\(serviceType)._tcp"])
            lines = result.standardOutput.split(separator: "\n").map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
                .filter { $0.first == "=" }
            if accept(lines) { return lines }
        } while ContinuousClock.now < deadline
        return lines
    }
}

/// A long-running child process (a daemon, `avahi-publish`), ended by its PID.
///
/// Spawned with `posix_spawnp` rather than Foundation's `Process`, for two reasons measured here:
/// `Process` hands the child the signal mask of the calling thread, and Swift concurrency's worker
/// threads block SIGTERM, SIGINT and SIGCHLD, so the child would ignore SIGTERM (and a shell's
/// `wait` would hang); and `Process` takes the closing of a descriptor it shares with the child for
/// the child's exit, so a daemon that closes inherited descriptors (avahi-daemon does) leaves it
/// blocked in `waitpid`. Here the child starts with an empty mask and default handlers, its
/// standard streams on /dev/null and no other descriptor, and is reaped with `waitpid` on its own PID.
final class ChildProcess {
    let pid: pid_t
    private var exited = false

    /// Starts `executable` (looked up in PATH) with `arguments`, adding `environment` to this process's.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else: NIO's sockets are not close-on-exec, and a child holding a test's
        // listening socket would keep its port bound after the test closed it.
        guard Self.addCloseFrom(&actions, 3) == 0 else {
            throw SpawnFailed(description: "posix_spawn_file_actions_addclosefrom_np failed")
        }

        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid = pid_t()
        let result = posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw SpawnFailed(description: "\(executable) could not be started: \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    struct SpawnFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which the Glibc module
    /// does not export.
    private static let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("glibc 2.34 or later is needed: posix_spawn_file_actions_addclosefrom_np is missing")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt).self)
    }()

    deinit {
        terminate()
    }

    /// Sends `signal` to the process (by PID) and waits until it exited.
    func terminate(signal: Int32 = SIGTERM) {
        guard !exited else { return }
        kill(pid, signal)
        waitUntilExit()
    }

    /// Waits until the process exited, and reaps it, on a thread of its own: for a process that
    /// takes its time to end, which would hold a thread of the cooperative pool (ProcessSupport.swift).
    func waitForExit() async {
        guard !exited else { return }
        let pid = self.pid
        await withCheckedContinuation { continuation in
            Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume()
            }.start()
        }
        exited = true
    }

    /// Waits until the process exited, and reaps it.
    func waitUntilExit() {
        guard !exited else { return }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        exited = true
    }
}

/// Short commands run to their end, with their output.
enum Command {
    struct Result: Sendable {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// Runs a command to its end and returns its status and output.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = environment.map { "\($0.key)=\($0.value)" }.sorted() + [executable] + arguments
        let output = Pipe()
        let error = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = error
        let status = try await process.runWatched().value
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Result(status: status, standardOutput: stdout, standardError: stderr)
    }
}
