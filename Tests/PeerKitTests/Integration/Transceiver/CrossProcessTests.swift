import Foundation
import Testing
@testable import PeerKit

/// The directory holding the built executables: `PEERKIT_BIN_DIR` (set by `make test`), or
/// `.build/debug` beside this package.
func binaryDirectory() -> URL {
    if let directory = ProcessInfo.processInfo.environment["PEERKIT_BIN_DIR"], !directory.isEmpty {
        return URL(fileURLWithPath: directory)
    }
    return URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug")
}

/// A `peerkit node` process whose JSON lines the test reads and whose stdin it writes.
final class NodeProcess: Sendable {
    let process: Process
    /// The process's exit, awaited without holding a thread (ProcessSupport.swift).
    let exit: ProcessExit
    private let input: FileHandle
    let lines: AsyncStream<[String: any Sendable]>

    init(arguments: [String], environment: [String: String] = [:]) throws {
        let executable = binaryDirectory().appendingPathComponent("peerkit")
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw TimedOut(what: "peerkit at \(executable.path); build it with `swift build` (make test does)")
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = ["node"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        let (lines, continuation) = AsyncStream.makeStream(of: [String: any Sendable].self)
        let reader = stdout.fileHandleForReading
        // A thread of its own reads the output (readabilityHandler misbehaves on Linux).
        let thread = Thread {
            var pending = Data()
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                pending.append(data)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = pending[pending.startIndex..<newline]
                    pending = Data(pending[pending.index(after: newline)...])
                    if let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any] {
                        continuation.yield(object.mapValues { "\($0)" as any Sendable }.merging(Self.flatten(object)) { $1 })
                    }
                }
            }
            continuation.finish()
        }
        exit = try process.runWatched()
        thread.start()
        self.process = process
        self.input = stdin.fileHandleForWriting
        self.lines = lines
    }

    /// `peer.name` and similar nested keys as flat strings.
    private static func flatten(_ object: [String: Any]) -> [String: any Sendable] {
        var flat: [String: any Sendable] = [:]
        for (key, value) in object {
            if let nested = value as? [String: Any] {
                for (nestedKey, nestedValue) in nested { flat["\(key).\(nestedKey)"] = "\(nestedValue)" }
            }
        }
        return flat
    }

    func command(_ line: String) {
        input.write(Data((line + "\n").utf8))
    }

    /// The first line whose `event` is `event` and whose keys match `fields`.
    func next(_ event: String, _ fields: [String: String] = [:], within seconds: Double = 20) async throws -> [String: any Sendable] {
        let lines = lines
        return try await within(seconds, "peerkit node to print \(event) \(fields)") {
            for await line in lines where (line["event"] as? String) == event {
                if fields.allSatisfy({ (line[$0.key] as? String) == $0.value }) { return line }
            }
            throw TimedOut(what: "\(event) (peerkit node exited)")
        }
    }

    /// Ends the process by its PID if it is still running.
    func terminate() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// What `peerkit node` sends and prints.
struct NodeMessage: Codable, Sendable, Equatable { var text: String }

@Suite("Two processes")
struct CrossProcessTests {
    @Test("a transceiver and a `peerkit node` process exchange messages both ways over TCP")
    func exchange() async throws {
        let serviceType = randomServiceType()
        let local = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "test-process"))
        try await local.start()
        defer { local.stop() }
        let inbox = Inbox<String>()
        local.receive(NodeMessage.self) { message, sender in inbox.put("\(sender.name): \(message.text)") }

        let node = try NodeProcess(arguments: [serviceType, "--name", "node", "--listen-host", "127.0.0.1", "--static", try endpoint(of: local).description])
        defer { node.terminate() }
        _ = try await node.next("peerConnected", ["peer.name": "test-process"])
        let peer = try await local.waitForPeer(timeout: .seconds(20)) { $0.name == "node" }

        node.command("broadcast hello from the other process")
        #expect(try await inbox.take(1) == ["node: hello from the other process"])
        try await local.send(NodeMessage(text: "hello back"), to: [peer])
        let message = try await node.next("message")
        #expect(message["text"] as? String == "hello back")
        #expect(message["from.name"] as? String == "test-process")

        // A graceful quit is seen as a disconnect without an error.
        let events = local.events()
        node.command("quit")
        let event = try await nextEvent(events, "peerDisconnected") { if case .peerDisconnected = $0 { return true } else { return false } }
        #expect(event == .peerDisconnected(Peer(id: peer.id, name: "node", isConnected: false), reason: nil))
        #expect(await node.exit.value == 0)
    }

    @Test("groups work across processes: membership both ways, a shout reaches members only, leave stops it")
    func groups() async throws {
        let serviceType = randomServiceType()
        let local = PeerTransceiver(configuration: loopbackConfiguration(serviceType: serviceType, name: "test-process"))
        try local.join("here")
        try await local.start()
        defer { local.stop() }
        let events = local.events()
        let inbox = Inbox<String>()
        local.receive(NodeMessage.self) { message, _ in inbox.put(message.text) }

        let node = try NodeProcess(arguments: [serviceType, "--name", "node", "--listen-host", "127.0.0.1", "--static", try endpoint(of: local).description])
        defer { node.terminate() }
        // The node learns our group right after the handshake.
        _ = try await node.next("peerJoinedGroup", ["peer.name": "test-process", "group": "here"])
        node.command("join there")
        _ = try await nextEvent(events, "the node to join there") {
            if case let .peerJoinedGroup(peer, group) = $0 { return peer.name == "node" && group == "there" } else { return false }
        }
        #expect(local.peers(inGroup: "there").map(\.name) == ["node"])
        try await local.send(NodeMessage(text: "to there"), toGroup: "there")
        #expect(try await node.next("message")["text"] as? String == "to there")

        // A shout to a group we are in arrives; one to a group we are not in does not.
        node.command("shout elsewhere not for us")
        _ = try await node.next("shouted", ["group": "elsewhere"])
        node.command("shout here for us")
        _ = try await node.next("shouted", ["group": "here"])
        #expect(try await inbox.take(1) == ["for us"])

        node.command("leave there")
        _ = try await nextEvent(events, "the node to leave there") {
            if case let .peerLeftGroup(peer, group) = $0 { return peer.name == "node" && group == "there" } else { return false }
        }
        #expect(try await local.send(NodeMessage(text: "gone"), toGroup: "there").isEmpty)
        node.command("quit")
        #expect(await node.exit.value == 0)
    }
}
