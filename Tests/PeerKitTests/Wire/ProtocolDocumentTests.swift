import Foundation
import NIOCore
import Testing
@testable import PeerKit

/// Keeps Documentation/Protocol.md true to the code.
@Suite("Protocol.md matches the code")
struct ProtocolDocumentTests {
    static let document: String = {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Documentation/Protocol.md")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// The contents of every fenced block of `language`.
    static func blocks(_ language: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append((current ?? []).joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    static var jsonFrames: [String] { blocks("json").flatMap { $0.split(separator: "\n").map(String.init) } }

    @Test("the document has examples of every control frame")
    func coverage() {
        #expect(!Self.document.isEmpty, "Documentation/Protocol.md is missing")
        for type in ["peerkit.hello", "peerkit.ping", "peerkit.pong", "peerkit.bye", "peerkit.error", "peerkit.rename", "peerkit.groups"] {
            #expect(Self.jsonFrames.contains { $0.contains("\"type\":\"\(type)\"") }, "no \(type) example")
        }
    }

    @Test("every JSON frame in the document parses as an envelope")
    func parses() throws {
        for json in Self.jsonFrames {
            let envelope = try EnvelopeParser.parse(ByteBuffer(string: json))
            #expect(!envelope.type.isEmpty)
        }
    }

    @Test("control frames in the document are exactly what PeerKit sends, byte for byte")
    func byteForByte() throws {
        var checked = 0
        for json in Self.jsonFrames {
            let envelope = try EnvelopeParser.parse(ByteBuffer(string: json))
            let frame: ConnectionStateMachine.ControlFrame
            switch envelope.type {
            case EnvelopeType.groups:
                var encoded = MessageCodec.encodeControl(type: EnvelopeType.groups, try envelope.decodePayload(GroupSnapshot.self)).frame()
                #expect(encoded.readInteger(as: UInt32.self).map(Int.init) == json.utf8.count)
                #expect(String(buffer: encoded) == json)
                checked += 1
                continue
            case EnvelopeType.hello:
                frame = .hello(try envelope.decodePayload(Hello.self))
            case EnvelopeType.ping:
                frame = .ping(id: try #require(envelope.id))
            case EnvelopeType.pong:
                frame = .pong(replyTo: envelope.replyTo)
            case EnvelopeType.bye:
                frame = .bye(reason: try envelope.decodePayload(Bye.self).reason)
            case EnvelopeType.error:
                frame = .error(reason: try envelope.decodePayload(ErrorPayload.self).reason, replyTo: envelope.replyTo)
            case EnvelopeType.rename:
                frame = .rename(name: try envelope.decodePayload(Rename.self).name)
            default:
                continue
            }
            var encoded = frame.encode()
            #expect(encoded.readInteger(as: UInt32.self).map(Int.init) == json.utf8.count)
            #expect(String(buffer: encoded) == json)
            checked += 1
        }
        #expect(checked >= 9)
    }

    @Test("the framing example's length bytes are right")
    func framingExample() {
        let body = #"{"type":"peerkit.bye","payload":{}}"#
        #expect(Self.document.contains("(\(body.utf8.count) bytes)"))
        #expect(Self.document.contains(String(format: "`00 00 00 %02x`", body.utf8.count)))
    }
}
