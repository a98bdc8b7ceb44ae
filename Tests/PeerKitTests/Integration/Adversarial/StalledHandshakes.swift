import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Strangers without the key: `count` TCP connections to 127.0.0.1:`port` from the loopback
/// addresses `sources` (127.0.0.2, …: other hosts, as far as the listener can tell), each sending
/// `payload` (half a TLS ClientHello, or nothing) and then nothing more, each re-opened as soon
/// as the listener closes it. One thread of its own polls them all until ``stop()``.
final class StalledHandshakes: Sendable {
    /// Half a TLS ClientHello: a handshake record header announcing 200 bytes, and 40 of them.
    static let halfClientHello: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0xC8, 0x01, 0x00, 0x00, 0xC4, 0x03, 0x03] + [UInt8](repeating: 0x2A, count: 34)

    private let port: Int
    /// How many connections it keeps open.
    let count: Int
    /// The addresses it connects from.
    let sources: [String]
    private let payload: [UInt8]
    private let stopped = Atomic(false)
    private let finished = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let done = Atomic(false)
    /// Connections opened in all (the first `count` and every re-opening).
    private let openedCount = Atomic(0)
    /// Connections the listener closed (or reset).
    private let closedCount = Atomic(0)

    init(port: Int, count: Int, sources: [String], payload: [UInt8]) {
        self.port = port
        self.count = count
        self.sources = sources
        self.payload = payload
    }

    var opened: Int { openedCount.load(ordering: .relaxed) }
    var closedByListener: Int { closedCount.load(ordering: .relaxed) }

    /// Opens the connections and starts re-opening them as they are closed.
    func start() {
        Thread { self.run() }.start()
    }

    /// Stops, closes every connection, and returns once the thread has.
    func stop() async {
        stopped.store(true, ordering: .relaxed)
        await withCheckedContinuation { continuation in
            let already = finished.withLock { waiter -> Bool in
                if done.load(ordering: .acquiring) { return true }
                waiter = continuation
                return false
            }
            if already { continuation.resume() }
        }
    }

    private func run() {
        // One array of poll entries, updated in place, so that each wake-up costs little: the
        // attacker must not take the CPU the listener needs.
        var polls = (0..<count).map { index in
            pollfd(fd: open(from: sources[index % sources.count]), events: Int16(POLLOUT), revents: 0)
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .relaxed) {
            let ready = poll(&polls, nfds_t(polls.count), 50)
            guard ready > 0 else { continue }
            var handled = 0
            for index in polls.indices where polls[index].revents != 0 {
                handled += 1
                let descriptor = polls[index].fd
                let revents = polls[index].revents
                polls[index].revents = 0
                var failed = revents & Int16(POLLERR | POLLHUP) != 0
                if polls[index].events == Int16(POLLOUT) && !failed {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
                    if error == 0 {
                        // Connected: send the payload; from now on only its close matters.
                        if !payload.isEmpty {
                            _ = payload.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        }
                        polls[index].events = Int16(POLLIN)
                        continue
                    }
                    failed = true
                }
                if !failed {
                    let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR)) { continue }
                }
                // Closed or reset by the listener: re-open at once.
                closedCount.wrappingAdd(1, ordering: .relaxed)
                Glibc.close(descriptor)
                polls[index] = pollfd(fd: open(from: sources[index % sources.count]), events: Int16(POLLOUT), revents: 0)
                if handled == ready { break }
            }
        }
        for entry in polls { Glibc.close(entry.fd) }
        let waiter = finished.withLock { waiter -> CheckedContinuation<Void, Never>? in
            done.store(true, ordering: .releasing)
            defer { waiter = nil }
            return waiter
        }
        waiter?.resume()
    }

    /// A non-blocking connect from `source` (port chosen by the kernel) to the listener.
    private func open(from source: String) -> Int32 {
        openedCount.wrappingAdd(1, ordering: .relaxed)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        _ = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return descriptor
    }
}
