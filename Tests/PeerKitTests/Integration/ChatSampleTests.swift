import Foundation
import NIOConcurrencyHelpers
import Testing

/// A `chat` process (the sample in Examples/Chat), run as a user runs it: its commands written to
/// its standard input, its output lines read from its standard output. When the tests run as
/// root it runs as nobody:nogroup, through setpriv.
final class ChatProcess: Sendable {
    let name: String
    let process: Process
    private let input: FileHandle
    private let output: AsyncStream<String>
    /// Every line printed so far, for failure messages.
    private let printed = NIOLockedValueBox<[String]>([])

    init(name: String, arguments: [String]) throws {
        let executable = binaryDirectory().appendingPathComponent("chat")
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw TimedOut(what: "chat at \(executable.path); build it with `swift build` (make test does)")
        }
        let process = Process()
        let arguments = ["--name", name] + arguments
        if getuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        let reader = stdout.fileHandleForReading
        let printed = printed
        // A thread of its own reads the output (readabilityHandler misbehaves on Linux).
        let thread = Thread {
            var pending = Data()
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                pending.append(data)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending = Data(pending[pending.index(after: newline)...])
                    printed.withLockedValue { $0.append(line) }
                    continuation.yield(line)
                }
            }
            continuation.finish()
        }
        try process.run()
        thread.start()
        self.name = name
        self.process = process
        self.input = stdin.fileHandleForWriting
        self.output = lines
    }

    /// Types `line` into the chat.
    func type(_ line: String) {
        input.write(Data((line + "\n").utf8))
    }

    /// The next output line that satisfies `predicate` (lines before it are passed over).
    @discardableResult
    func next(_ what: String, within seconds: Double = 30, where predicate: @escaping @Sendable (String) -> Bool) async throws -> String {
        let output = output
        do {
            return try await within(seconds, "\(name) to print \(what)") {
                for await line in output where predicate(line) { return line }
                throw TimedOut(what: "\(what): \(self.name)'s chat exited")
            }
        } catch {
            Issue.record("\(error) Printed so far: \(printed.withLockedValue { $0 })")
            throw error
        }
    }

    /// The next output line equal to `line`.
    func expect(_ line: String) async throws {
        try await next("\"\(line)\"") { $0 == line }
    }

    /// Ends the input, as a user's ^D does, and waits for the process to exit; returns its status.
    func endInput(within seconds: Double = 30) async throws -> Int32 {
        try input.close()
        let process = process
        return try await within(seconds, "\(name)'s chat to exit") {
            while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
            return process.terminationStatus
        }
    }

    /// Ends the process by its PID if it still runs (a failed test's clean-up).
    func terminate() {
        if process.isRunning { process.terminate() }
    }
}

@Suite("The chat sample (Examples/Chat) run as two processes")
struct ChatSampleTests {
    @Test("two chats with one passphrase find each other through Avahi, and exchange a room message, a direct message and /who")
    func twoChats() async throws {
        // A service type of this test's own, so that no other chat or test is seen.
        let options = ["--service-type", randomServiceType(), "--passphrase", "correct horse battery staple", "--listen-host", "127.0.0.1"]
        let alice = try ChatProcess(name: "alice", arguments: options)
        defer { alice.terminate() }
        try await alice.next("ready") { $0.hasPrefix("ready: alice listens on port ") }
        let bob = try ChatProcess(name: "bob", arguments: options)
        defer { bob.terminate() }

        // They find each other (the loopback avahi-daemon), and connect over pre-shared-key TLS.
        try await alice.expect("* bob is here")
        try await bob.expect("* alice is here")

        // A room: both join, each hearing of the other's joining, before anything is said there.
        alice.type("/join kitchen")
        try await alice.expect("joined #kitchen")
        try await bob.expect("* alice joined #kitchen")
        bob.type("/join kitchen")
        try await bob.expect("joined #kitchen")
        try await alice.expect("* bob joined #kitchen")
        alice.type("the kettle is on")
        try await bob.expect("[#kitchen] alice: the kettle is on")

        // A direct message.
        bob.type("/msg alice two sugars, please")
        try await alice.expect("(direct) bob: two sugars, please")

        // A request to every peer: bob answers with his name and rooms.
        bob.type("/join garden")
        try await bob.expect("joined #garden")
        try await alice.expect("* bob joined #garden")
        alice.type("/who")
        try await alice.expect("who: bob in #garden #kitchen")
        try await alice.expect("who: 1 of 1 peers answered")

        // Leaving: alice hears of it; a user's ^D ends each chat with status 0.
        bob.type("/leave kitchen")
        try await bob.expect("left #kitchen")
        try await alice.expect("* bob left #kitchen")
        #expect(try await bob.endInput() == 0)
        try await alice.expect("* bob left #garden")
        try await alice.next("bob's departure") { $0.hasPrefix("* bob left") && !$0.contains("#") }
        #expect(try await alice.endInput() == 0)
    }
}
