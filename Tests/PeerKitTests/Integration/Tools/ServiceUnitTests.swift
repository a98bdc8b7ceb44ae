import Foundation
import Testing

/// The repository's root, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Where `systemd-analyze` is, if installed (scripts/bootstrap installs the `systemd` package for it).
private let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}

@Suite("listrd's systemd unit")
struct ServiceUnitTests {
    /// The unit as `make install` writes it, with `@BINDIR@` pointing at the built listrd, in a
    /// fresh directory readable by the unprivileged user the check runs as.
    private func installedUnit() throws -> URL {
        let template = try String(contentsOf: repositoryRoot.appendingPathComponent("packaging/systemd/listrd.service.in"), encoding: .utf8)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("listrd-unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let unit = directory.appendingPathComponent("listrd.service")
        try template.replacingOccurrences(of: "@BINDIR@", with: binaryDirectory().path).write(to: unit, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: unit.path)
        return unit
    }

    @Test("systemd-analyze verify accepts the unit without a single warning",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed; scripts/bootstrap installs the systemd package"))
    func verify() async throws {
        let analyze = try #require(systemdAnalyze)
        let unit = try installedUnit()
        defer { try? FileManager.default.removeItem(at: unit.deletingLastPathComponent()) }
        // --man=no: the unit's Documentation=man:listrd(1) is installed by make install, not here.
        let arguments = ["verify", "--man=no", unit.path]
        let result = getuid() == 0
            ? try await Command.run("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", analyze] + arguments)
            : try await Command.run(analyze, arguments)
        #expect(result.status == 0, "\(result.standardError)")
        // Unknown keys and similar mistakes are only warnings (status 0): none is allowed.
        #expect(result.standardError.isEmpty, "\(result.standardError)")
    }

    @Test("the unit runs listrd unprivileged, hardened, with its store in its state directory and readiness by notify")
    func hardening() throws {
        let text = try String(contentsOf: try installedUnit(), encoding: .utf8)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for required in ["DynamicUser=yes", "StateDirectory=listrd", "ProtectSystem=strict", "NoNewPrivileges=yes", "Type=notify", "CapabilityBoundingSet="] {
            #expect(lines.contains(required), "missing \(required)")
        }
        #expect(text.contains("ExecStart=\(binaryDirectory().path)/listrd --store %S/listrd/store.json"))
    }
}
