import Foundation

/// Where the `listrd` and `listrctl` binaries under test are: `$PEERKIT_BIN_DIR` (set by
/// `make test`), else `.build/debug` of this package.
enum ListrBinaries {
    static func directory() -> URL {
        if let bin = ProcessInfo.processInfo.environment["PEERKIT_BIN_DIR"], !bin.isEmpty {
            return URL(fileURLWithPath: bin, isDirectory: true)
        }
        // <package>/Tests/ListrTests/EndToEnd/ListrBinaries.swift
        let package = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return package.appendingPathComponent(".build/debug", isDirectory: true)
    }

    /// The binary named `name`, or a failure saying how to build it.
    static func url(_ name: String) throws -> URL {
        let url = directory().appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw TestFailure("""
                The \(name) binary is not at \(url.path). Build it first (swift build), or set PEERKIT_BIN_DIR \
                to the folder that holds it (make test does: PEERKIT_BIN_DIR=$(swift build --show-bin-path)).
                """)
        }
        return url
    }
}
