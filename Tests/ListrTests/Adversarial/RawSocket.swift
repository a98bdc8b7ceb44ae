import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A plain blocking TCP socket on 127.0.0.1 that speaks PeerKit's framing by hand, so that a
/// test can behave as no PeerKit peer would: send huge length fields, flood, never read, or say
/// nothing at all. Every call blocks; run them with ``blocking(_:)``, never on the cooperative pool.
///
/// A value type holding only the descriptor, so it is `Sendable`; the test that opens one closes it.
struct RawSocket: Sendable {
    let descriptor: Int32

    /// Connects to 127.0.0.1:`port`, from `source` (another loopback address stands for another
    /// host). With `waitForConnection: false` the connect is started without waiting for it (for
    /// opening thousands of idle connections).
    static func connect(port: Int, from source: String? = nil, waitForConnection: Bool = true) throws -> RawSocket {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed: errno \(errno).") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let error = errno
                Glibc.close(descriptor)
                throw TestFailure("bind to \(source) failed: errno \(error).")
            }
        }
        if !waitForConnection {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 && !(errno == EINPROGRESS && !waitForConnection) {
            let error = errno
            Glibc.close(descriptor)
            throw TestFailure("connect to 127.0.0.1:\(port) failed: errno \(error).")
        }
        return RawSocket(descriptor: descriptor)
    }

    /// Reads and writes give up after `seconds` (reads then return nil as if closed).
    func setTimeout(seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes all of `bytes`, however long the other side takes to read them, until `stop` is
    /// set: a write that times out goes on from where it was, so the stream stays whole (a
    /// batch written again from its start after a partial write would cut a frame in two).
    /// False when the other side closed or reset the connection, or `stop` was set first.
    func write(_ bytes: [UInt8], until stop: Flag) -> Bool {
        var offset = 0
        while offset < bytes.count {
            if stop.isSet { return false }
            let written = bytes.withUnsafeBytes { buffer in
                send(descriptor, buffer.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Writes all of `bytes`; false when the other side closed or reset the connection (or the
    /// write timed out).
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                send(descriptor, buffer.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Reads exactly `count` bytes; nil on end of stream, error or timeout.
    func read(count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + offset, count - offset, 0) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return nil }
            offset += got
        }
        return bytes
    }

    /// Everything the other side sends until it closes (or until an error or timeout).
    func readToEnd() -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return result }
            result += buffer[0..<got]
        }
    }

    /// The next frame's JSON text; nil on end of stream, error or timeout.
    func readFrame() -> String? {
        guard let header = read(count: 4) else { return nil }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length <= 64 * 1024 * 1024, let body = read(count: length) else { return nil }
        return String(decoding: body, as: UTF8.self)
    }

    /// The next frame that is not a ping (pings are answered with a pong); nil when closed.
    func readMessage() -> String? {
        while let frame = readFrame() {
            if frame.contains("\"type\":\"peerkit.ping\"") {
                if let id = Self.value(of: "id", in: frame) {
                    write(Self.frame(#"{"type":"peerkit.pong","replyTo":"\#(id)","payload":{}}"#))
                }
                continue
            }
            return frame
        }
        return nil
    }

    /// Whether the other side closed the connection within `seconds` (reading and dropping
    /// whatever it sends until then).
    func closedByPeer(within seconds: Double) -> Bool {
        setTimeout(seconds: seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
            if got == 0 { return true }
            if got < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return false }
                return true  // reset
            }
        }
        return false
    }

    /// Sends a valid hello for `serviceType`, with `name` as the peer name, listing `features`.
    func sayHello(serviceType: String, name: String, peerID: String = UUID().uuidString, features: [String]? = nil) {
        write(Self.frame(Self.hello(serviceType: serviceType, name: name, peerID: peerID, features: features)))
    }

    func close() {
        Glibc.close(descriptor)
    }

    /// The bytes of a frame whose body is `json`.
    static func frame(_ json: String) -> [UInt8] {
        let body = Array(json.utf8)
        return header(length: body.count) + body
    }

    /// A frame's 4-byte big-endian length field.
    static func header(length: Int) -> [UInt8] {
        let value = UInt32(length)
        return [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// A `peerkit.hello` envelope; `name` is JSON-escaped (it may hold control characters).
    static func hello(serviceType: String, name: String, peerID: String, features: [String]? = nil) -> String {
        var payload: [String: Any] = ["protocol": 1, "peerID": peerID, "name": name, "serviceType": serviceType]
        if let features { payload["features"] = features }
        let data = (try? JSONSerialization.data(withJSONObject: ["type": "peerkit.hello", "payload": payload])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// The string value of `key` in a flat JSON envelope, e.g. its `id` or `replyTo`.
    static func value(of key: String, in json: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return nil }
        return object[key] as? String
    }
}

/// Runs blocking socket code on a thread of its own, so that it never holds one of the few
/// threads of Swift's cooperative pool.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// What /proc says about a process: its memory and the CPU time it used.
enum ProcStatus {
    /// A `kB` field of /proc/PID/status, such as `VmRSS` (resident now) or `VmHWM` (the peak), in bytes.
    static func bytes(_ field: String, pid: Int32) throws -> Int {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            if let kilobytes = Int(line.dropFirst(field.count + 1).filter(\.isNumber)) { return kilobytes * 1024 }
        }
        throw TestFailure("/proc/\(pid)/status has no \(field) line.")
    }

    /// User plus system CPU time the process used so far, in seconds.
    static func cpuSeconds(pid: Int32) throws -> Double {
        let text = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        guard let close = text.lastIndex(of: ")") else { throw TestFailure("/proc/\(pid)/stat is not readable: \(text)") }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw TestFailure("/proc/\(pid)/stat has no CPU times: \(text)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// How many file descriptors the process has open.
    static func openDescriptors(pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }
}

extension String {
    /// The lines of this text that contain `fragment`.
    func lines(containing fragment: String) -> [Substring] {
        split(separator: "\n").filter { $0.contains(fragment) }
    }
}

/// A flag one task sets and another reads.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// A count one task adds to and another reads.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add(_ amount: Int) { count.withLock { $0 += amount } }
    var value: Int { count.withLock { $0 } }
}
