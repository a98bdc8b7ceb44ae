import Foundation
import Testing

@Suite("listrd under systemd")
struct ListrdNotifyTests {
    @Test("listrd sends READY=1 to NOTIFY_SOCKET once it listens, and STOPPING=1 on SIGTERM")
    func readiness() async throws {
        try await AvahiTestSupport.requireDaemon()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("listrd-notify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        // Writable by the unprivileged user listrd runs as (for its store), whatever the umask.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketPath = directory.appendingPathComponent("notify").path

        // What systemd does: a datagram socket at NOTIFY_SOCKET, read one message at a time.
        // (Plain sockets: NIO's datagram channel cannot name the unbound sender systemd clients use.)
        let (messages, continuation) = AsyncStream.makeStream(of: String.self)
        let receiver = try NotifySocket(path: socketPath)
        defer { receiver.close() }
        receiver.startReading(into: continuation)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: socketPath)

        let store = directory.appendingPathComponent("store.sqlite").path
        let listrd = ToolRun.path("listrd")
        let arguments = [listrd, "--store", store, "--listen-host", "127.0.0.1", "--service-type", AvahiTestSupport.randomServiceType(), "--name", "notify-test"]
        let environment = ["NOTIFY_SOCKET": socketPath, "LISTR_KEY_FILE": directory.appendingPathComponent("key").path]
        let process = getuid() == 0
            ? try ChildProcess("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments, environment: environment)
            : try ChildProcess(listrd, Array(arguments.dropFirst()), environment: environment)
        defer { process.terminate() }

        let ready = try await within(30, "READY=1 from listrd") {
            await messages.first { $0.hasPrefix("READY=1") }
        }
        #expect(ready?.hasPrefix("READY=1\n") == true, "\(ready ?? "nothing")")
        #expect(ready?.contains("STATUS=Serving on port ") == true)

        kill(process.pid, SIGTERM)
        let stopping = try await within(30, "STOPPING=1 from listrd") {
            await messages.first { $0.hasPrefix("STOPPING=1") }
        }
        #expect(stopping != nil)
        await process.waitForExit()
    }
}

/// A Unix datagram socket bound to a path, read by a thread of its own until closed.
private final class NotifySocket: Sendable {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw TimedOut(what: "a Unix datagram socket (errno \(errno))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw TimedOut(what: "a socket path shorter than 108 bytes: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw TimedOut(what: "binding \(path) (errno \(errno))") }
    }

    func startReading(into continuation: AsyncStream<String>.Continuation) {
        let descriptor = descriptor
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                continuation.yield(String(decoding: buffer[0..<count], as: UTF8.self))
            }
            continuation.finish()
        }.start()
    }

    func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}
