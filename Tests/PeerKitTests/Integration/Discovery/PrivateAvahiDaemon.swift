import Foundation
import Testing

/// A D-Bus system bus and an avahi-daemon of the test's own, that it may stop and restart without
/// disturbing the shared daemon other tests use.
///
/// Both run in a new network namespace (its own loopback, so no multicast reaches the shared
/// daemon or leaves the machine) and mount namespace (a tmpfs on /run for their PID files). The
/// bus listens on a socket under a temporary directory, which processes outside the namespaces
/// reach through `DBUS_SYSTEM_BUS_ADDRESS`. Needs root, `unshare`, `nsenter` and `ip`.
final class PrivateAvahiDaemon {
    struct StartFailed: Error, CustomStringConvertible {
        var description: String
    }

    let directory: URL
    /// The address to put in `DBUS_SYSTEM_BUS_ADDRESS` to use this bus and daemon.
    var busAddress: String { "unix:path=\(directory.path)/bus" }

    private var bus: ChildProcess?
    private var daemon: ChildProcess?

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("peerkit-avahi-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try """
        [server]
        host-name=peerkit-private
        allow-interfaces=lo
        use-ipv4=yes
        use-ipv6=no
        enable-dbus=yes
        ratelimit-interval-usec=1000000
        ratelimit-burst=1000
        [wide-area]
        enable-wide-area=no
        [publish]
        publish-hinfo=no
        publish-workstation=no
        [reflector]
        enable-reflector=no
        [rlimits]

        """.write(to: directory.appendingPathComponent("avahi-daemon.conf"), atomically: true, encoding: .utf8)
    }

    deinit {
        stopDaemon()
        bus?.terminate()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the bus (once) and the daemon, and waits until `avahi-browse` reaches the daemon.
    func start() async throws {
        if bus == nil {
            let script = "mount -t tmpfs tmpfs /run && mkdir -p /run/dbus /run/avahi-daemon && ip link set lo up && exec dbus-daemon --system --nofork --address=\(busAddress)"
            bus = try ChildProcess("unshare", ["--net", "--mount", "sh", "-c", script])
        }
        let socket = directory.appendingPathComponent("bus").path
        try await waitUntil("the private D-Bus socket exists") { FileManager.default.fileExists(atPath: socket) }
        guard let busPID = bus?.pid else { throw StartFailed(description: "the private bus did not start") }
        daemon = try ChildProcess("nsenter", ["-t", "\(busPID)", "-n", "-m", "avahi-daemon", "--no-drop-root", "--no-chroot", "--no-rlimits",
                                              "--no-proc-title", "-f", directory.appendingPathComponent("avahi-daemon.conf").path],
                                  environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
        try await waitUntil("the private avahi-daemon answers") {
            (try? await Command.run("timeout", ["5", "avahi-browse", "-at"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": self.busAddress]).status) == 0
        }
    }

    /// Kills the daemon (the bus stays up), as a crash or `systemctl stop avahi-daemon` would end it.
    func stopDaemon() {
        daemon?.terminate(signal: SIGKILL)
        daemon = nil
    }

    /// Starts `avahi-publish -s` against this daemon.
    func publish(_ name: String, type: String, port: Int, txt: [String] = []) throws -> ChildProcess {
        try ChildProcess("avahi-publish", ["-s", name, type, "\(port)"] + txt, environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
    }

    /// The resolved `avahi-browse -rpt` lines for `type` on this daemon, split into fields.
    func browseResolved(_ type: String) async throws -> [[String]] {
        let result = try await Command.run("timeout", ["10", "avahi-browse", "-rpt", type], environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
        return result.standardOutput.split(separator: "\n")
            .map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
            .filter { $0.first == "=" }
    }

    private func waitUntil(_ what: String, timeout: Duration = .seconds(15), _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw StartFailed(description: "Timed out after \(timeout) waiting until \(what).")
    }
}
