import Foundation
import Testing

@Suite("README snippet")
struct ReadmeSnippetTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the README's first Swift snippet is Examples/ReadmeSnippet/main.swift verbatim, which the package builds")
    func snippetIsCompiled() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let compiled = try String(contentsOf: Self.root.appendingPathComponent("Examples/ReadmeSnippet/main.swift"), encoding: .utf8)
        let start = try #require(readme.range(of: "```swift\n"))
        let end = try #require(readme.range(of: "```", range: start.upperBound..<readme.endIndex))
        #expect(String(readme[start.upperBound..<end.lowerBound]) == compiled)
    }

    @Test("the built snippet runs and exits cleanly")
    func snippetRuns() async throws {
        let executable = binaryDirectory().appendingPathComponent("readme-snippet")
        #expect(FileManager.default.isExecutableFile(atPath: executable.path), "build it with `swift build` (make test does)")
        let process = Process()
        process.executableURL = executable
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        #expect(try await process.runWatched().value == 0)
    }
}
