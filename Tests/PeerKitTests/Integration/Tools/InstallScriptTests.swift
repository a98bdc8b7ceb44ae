import Foundation
import Testing

/// The repository's root, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("make install's script")
struct InstallScriptTests {
    @Test("it installs the tools, man pages, completions for three shells and the unit pointing at PREFIX/bin")
    func install() async throws {
        let fileManager = FileManager.default
        let root = fileManager.temporaryDirectory.appendingPathComponent("install-\(UUID().uuidString)")
        let manDirectory = root.appendingPathComponent("man"), stage = root.appendingPathComponent("stage")
        try fileManager.createDirectory(at: manDirectory, withIntermediateDirectories: true)
        try fileManager.createDirectory(at: stage, withIntermediateDirectories: true)
        defer { try? fileManager.removeItem(at: root) }
        for tool in ["peerkit", "listrd", "listrctl"] {
            try ".Dd\n.Dt \(tool.uppercased()) 1\n".write(to: manDirectory.appendingPathComponent("\(tool).1"), atomically: true, encoding: .utf8)
        }
        // Everything readable and writable by the unprivileged user the script runs as.
        for directory in [root, manDirectory, stage] {
            try fileManager.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        }
        let script = repositoryRoot.appendingPathComponent("packaging/install.sh").path
        let arguments = [script, binaryDirectory().path, manDirectory.path]
        let environment = ["PREFIX": "/opt/listr", "DESTDIR": stage.path]
        let result = getuid() == 0
            ? try await Command.run("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments, environment: environment)
            : try await Command.run(script, Array(arguments.dropFirst()), environment: environment)
        #expect(result.status == 0, "\(result.standardError)")

        let prefix = stage.appendingPathComponent("opt/listr").path
        for tool in ["peerkit", "listrd", "listrctl"] {
            #expect(fileManager.isExecutableFile(atPath: "\(prefix)/bin/\(tool)"), "\(tool)")
            #expect(fileManager.fileExists(atPath: "\(prefix)/share/man/man1/\(tool).1"), "\(tool).1")
            let bash = try String(contentsOfFile: "\(prefix)/share/bash-completion/completions/\(tool)", encoding: .utf8)
            #expect(bash.contains("complete"), "\(tool) bash completion")
            #expect(fileManager.fileExists(atPath: "\(prefix)/share/zsh/site-functions/_\(tool)"), "\(tool) zsh completion")
            #expect(fileManager.fileExists(atPath: "\(prefix)/share/fish/vendor_completions.d/\(tool).fish"), "\(tool) fish completion")
        }
        let unit = try String(contentsOfFile: "\(prefix)/lib/systemd/system/listrd.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/opt/listr/bin/listrd "))
        #expect(!unit.contains("@BINDIR@"))
    }

    @Test("it refuses to install without man pages, saying how to make them")
    func noManPages() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("install-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: root.path)
        defer { try? FileManager.default.removeItem(at: root) }
        let script = repositoryRoot.appendingPathComponent("packaging/install.sh").path
        let arguments = [script, binaryDirectory().path, root.appendingPathComponent("no-man").path]
        let environment = ["PREFIX": "/opt/listr", "DESTDIR": root.path]
        let result = getuid() == 0
            ? try await Command.run("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments, environment: environment)
            : try await Command.run(script, Array(arguments.dropFirst()), environment: environment)
        #expect(result.status != 0)
        #expect(result.standardError.contains("make man"), "\(result.standardError)")
    }
}
