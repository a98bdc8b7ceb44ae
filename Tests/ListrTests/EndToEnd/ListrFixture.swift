import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One end-to-end scenario's world: a random service type, a temporary folder for stores and
/// files, the processes it started (all killed by PID when the scenario ends), and helpers to
/// run the real `listrd` and `listrctl`.
final class ListrFixture {
    /// Unique per scenario, so that scenarios running at once on one avahi-daemon never see each other.
    let serviceType: String
    /// A fresh temporary folder.
    let folder: String
    private var started: [TestProcess] = []

    /// How long to wait for a daemon to be ready or a command to end: generous, because tests
    /// run in parallel on few cores.
    static let deadline: Duration = .seconds(60)
    /// The `--timeout` given to listrctl.
    static let commandTimeout = "20"

    init() throws {
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        serviceType = "t" + String((0..<8).map { _ in letters.randomElement() ?? "x" })
        folder = NSTemporaryDirectory() + "listr-e2e-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Self.giveToTestUser(folder)
    }

    /// When the tests run as root, makes `path` belong to the user the programs run as (see
    /// ``TestProcess/launch(_:_:name:environment:)``), so that they can write it.
    static func giveToTestUser(_ path: String) throws {
        guard TestProcess.dropsPrivileges else { return }
        guard let (uid, gid) = TestProcess.unprivilegedIDs else {
            throw TestFailure("The tests run as root and start programs as nobody:nogroup, but that user or group does not exist.")
        }
        guard chown(path, uid, gid) == 0 else {
            throw TestFailure("chown of \(path) to nobody:nogroup failed: \(String(cString: strerror(errno))).")
        }
    }

    /// Writes `data` to `name` in the scenario's folder, as the programs' user would have.
    @discardableResult
    func write(_ data: Data, to name: String) throws -> String {
        let target = path(name)
        try data.write(to: URL(fileURLWithPath: target))
        try Self.giveToTestUser(target)
        return target
    }

    deinit {
        for process in started { process.send(SIGKILL) }
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// The scenario's own key file (LISTR_KEY_FILE), so that tests never touch ~/.config/listr/key.
    var keyEnvironment: [String: String] { ["LISTR_KEY_FILE": path("key")] }

    /// A path in the scenario's folder.
    func path(_ name: String) -> String { folder + "/" + name }

    /// Fails with the reason unless an avahi-daemon answers on the system bus.
    static func requireAvahi() async throws {
        guard let browse = ["/usr/bin/avahi-browse", "/bin/avahi-browse"].first(where: FileManager.default.isExecutableFile) else {
            throw TestFailure("avahi-browse is not installed, so avahi-daemon cannot be checked. Run scripts/avahi-up (make test does).")
        }
        let process = try TestProcess.launch(URL(fileURLWithPath: browse), ["-at"], name: "avahi-browse -at")
        let result = try await process.waitForExit(timeout: .seconds(20))
        guard result.exit == .status(0) else {
            throw TestFailure("avahi-daemon does not answer (avahi-browse -at: \(result.exit), \(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines))). These tests need it: run scripts/avahi-up (make test does).")
        }
    }

    /// Starts `listrd` on the scenario's service type and waits for its ready line; returns the
    /// process and the port it listens on.
    /// `name` nil starts it without `--name`, so that it takes the name saved in the store's
    /// settings; `readyName` is then the name its ready line must show.
    func startDaemon(
        name: String? = "Listr test", readyName: String? = nil, store: String? = nil, extra: [String] = []
    ) async throws -> (process: TestProcess, port: Int) {
        let arguments = ["--service-type", serviceType, "--store", store ?? path("store.sqlite"), "--listen-host", "127.0.0.1"]
            + (name.map { ["--name", $0] } ?? []) + extra
        let name = readyName ?? name ?? ""
        let daemon = try TestProcess.launch(try ListrBinaries.url("listrd"), arguments, name: "listrd \"\(name)\"", environment: keyEnvironment)
        started.append(daemon)
        try await daemon.waitFor("its ready line", timeout: Self.deadline) { _, stderr in
            stderr.contains("serving \"\(name)\"")
        }
        guard let port = Self.port(inReadyLine: daemon.stderr) else {
            throw TestFailure("The ready line of \(daemon.name) does not name its port:\n\(daemon.stderr)")
        }
        return (daemon, port)
    }

    /// Starts `listrd --insecure` on `store` expecting it to refuse to start; returns how it ended
    /// (it is killed, and this throws, if it is still running after the deadline).
    func runDaemonToExit(store: String) async throws -> TestProcess.Result {
        let daemon = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            // --insecure: listrd checks its key before its store, and these scenarios are about
            // the store (a key file would also appear in the folder they look into).
            ["--service-type", serviceType, "--store", store, "--listen-host", "127.0.0.1", "--insecure"],
            name: "listrd on \((store as NSString).lastPathComponent)"
        )
        started.append(daemon)
        return try await daemon.waitForExit(timeout: Self.deadline)
    }

    /// Runs `listrctl` with `arguments` plus this scenario's service type and timeout; waits for it.
    func ctl(_ arguments: String..., timeout: String = ListrFixture.commandTimeout) async throws -> TestProcess.Result {
        try await ctl(arguments, timeout: timeout)
    }

    /// Runs `listrctl` with `arguments` plus this scenario's service type and timeout; waits for it.
    func ctl(_ arguments: [String], timeout: String = ListrFixture.commandTimeout) async throws -> TestProcess.Result {
        let process = try launchCtl(arguments, timeout: timeout)
        return try await process.waitForExit(timeout: Self.deadline)
    }

    /// Starts `listrctl` without waiting for it.
    func launchCtl(_ arguments: [String], timeout: String = ListrFixture.commandTimeout) throws -> TestProcess {
        let process = try TestProcess.launch(
            try ListrBinaries.url("listrctl"),
            arguments + ["--service-type", serviceType, "--timeout", timeout],
            name: "listrctl \(arguments.joined(separator: " "))",
            environment: keyEnvironment
        )
        started.append(process)
        return process
    }

    /// Stops a daemon with SIGTERM and returns how it ended.
    func stop(_ daemon: TestProcess) async throws -> TestProcess.Result {
        daemon.send(SIGTERM)
        return try await daemon.waitForExit(timeout: Self.deadline)
    }

    private static func port(inReadyLine log: String) -> Int? {
        guard let range = log.range(of: " on port ") else { return nil }
        return Int(log[range.upperBound...].prefix { $0.isNumber })
    }
}
