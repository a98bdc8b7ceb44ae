import Foundation
import Testing

@Suite("Documentation/Testing.md")
struct TestingDocumentTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The Swift block that follows `marker` in `document`.
    private func block(after marker: String, in document: String) throws -> String {
        let anchor = try #require(document.range(of: marker), "no \(marker) in the document")
        let start = try #require(document.range(of: "```swift\n", range: anchor.upperBound..<document.endIndex))
        let end = try #require(document.range(of: "\n```", range: start.upperBound..<document.endIndex))
        return String(document[start.upperBound..<end.lowerBound]) + "\n"
    }

    @Test("the two-peer chat example in Testing.md and in the DocC article is Tests/PeerKitTests/TestKit/ChatExampleTests.swift verbatim, which make test runs")
    func chatExampleIsTheTest() throws {
        let source = try String(contentsOf: Self.root.appendingPathComponent("Tests/PeerKitTests/TestKit/ChatExampleTests.swift"), encoding: .utf8)
        let marker = "<!-- Tests/PeerKitTests/TestKit/ChatExampleTests.swift, verbatim -->"
        for document in ["Documentation/Testing.md", "Sources/PeerKit/PeerKit.docc/TestingWithPeerKit.md"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            #expect(try block(after: marker, in: text) == source, "\(document) differs from the test file")
        }
    }
}
