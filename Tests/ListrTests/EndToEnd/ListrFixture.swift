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
    func startDaemon(name: String = "Listr test", store: String? = nil, extra: [String] = []) async throws -> (process: TestProcess, port: Int) {
        let arguments = ["--service-type", serviceType, "--name", name, "--store", store ?? path("store.json"),
                         "--listen-host", "127.0.0.1"] + extra
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
