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
        let result = try await ChildProcess.run("/usr/bin/timeout", ["10", "avahi-browse", "-at"])
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
            let result = try await ChildProcess.run("/usr/bin/timeout", ["10", "avahi-browse", "-rpt", "_\(serviceType)._tcp"])
            lines = result.standardOutput.split(separator: "\n").map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
                .filter { $0.first == "=" }
            if accept(lines) { return lines }
        } while ContinuousClock.now < deadline
        return lines
    }
}

/// A child process, ended by its PID.
final class ChildProcess {
    struct Result: Sendable {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    private let process: Process

    var pid: Int32 { process.processIdentifier }

    /// Starts `executable` (an absolute path, or a name looked up in PATH by `env`) with `arguments`.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = environment.map { "\($0.key)=\($0.value)" }.sorted() + [executable] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
    }

    deinit {
        terminate()
    }

    /// Ends the process (by PID, with SIGKILL) and waits until it exited.
    ///
    /// SIGKILL, because Foundation's Process spawns children with the signal mask of the calling
    /// thread, and Swift concurrency's worker threads block SIGTERM and SIGINT: the child would
    /// never see them.
    func terminate() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
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
        let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Result(status: status, standardOutput: stdout, standardError: stderr)
    }
}
