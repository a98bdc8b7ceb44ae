import Foundation
@testable import PeerKit

/// Runs one of the package's executables to its end; as `nobody` when the tests run as root.
enum ToolRun {
    /// The path of the built executable `name`.
    static func path(_ name: String) -> String {
        binaryDirectory().appendingPathComponent(name).path
    }

    /// Runs `tool` with `arguments` and returns its status and output.
    static func run(_ tool: String, _ arguments: [String]) async throws -> Command.Result {
        let executable = path(tool)
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TimedOut(what: "\(tool) at \(executable); build it with `swift build` (make test does)")
        }
        if getuid() == 0 {
            return try await Command.run("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", executable] + arguments)
        }
        return try await Command.run(executable, arguments)
    }

    /// The JSON objects of `output`, one a line.
    static func jsonLines(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }
}

/// What a responder answers to `peerkit request` in the inspector tests (plaintext and certificates).
struct Greeting: Codable, Sendable, PeerMessage {
    static var messageType: String { "test.Greeting" }
    var name: String
}

/// The answer to a ``Greeting``.
struct GreetingReply: Codable, Sendable, PeerMessage {
    static var messageType: String { "test.GreetingReply" }
    var text: String
}
