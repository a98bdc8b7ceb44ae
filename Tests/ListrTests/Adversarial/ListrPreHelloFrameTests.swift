import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real `listrd` (`--insecure`) sent frames of 256 MiB before the hello from raw sockets on
/// 127.0.0.1: it refuses each at its length field and logs the refusals once, then counted every
/// 10 s (PeerKit's `HandshakeSlots`). Unlike the suites named `…AdversarialTests`, this one runs
/// with the rest, in parallel: it waits for that count and uses little CPU, its sockets write from
/// one thread each without a pause (a raw peer silent before its hello would be closed at the
/// pre-handshake timeout). It took 10 s alone and 27 s beside the whole suite (2026-12-06), which
/// it does not lengthen.
@Suite("listrd and frames over its handshake limit")
struct ListrPreHelloFrameTests {
    @Test("six 256 MiB frames before the hello are refused at their length field and do not grow listrd's memory")
    func oversizedFramesBeforeHello() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        let baseline = try ProcStatus.bytes("VmRSS", pid: daemon.pid)

        // Each attacker announces 256 MiB and then streams up to 64 MiB of it; a listrd that
        // waits for the whole frame buffers all of it.
        let results = try await withThrowingTaskGroup(of: (closed: Bool, sent: Int).self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await blocking {
                        let socket = try RawSocket.connect(port: port)
                        defer { socket.close() }
                        socket.setTimeout(seconds: 10)
                        guard socket.write(RawSocket.header(length: 256 * 1024 * 1024)) else { return (true, 0) }
                        let chunk = [UInt8](repeating: UInt8(ascii: " "), count: 1024 * 1024)
                        var sent = 0
                        while sent < 64 * 1024 * 1024, socket.write(chunk) { sent += chunk.count }
                        return (socket.closedByPeer(within: 10), sent)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let peak = try ProcStatus.bytes("VmHWM", pid: daemon.pid)
        #expect(results.allSatisfy { $0.closed }, "listrd did not close every connection that announced a 256 MiB frame before its hello: \(results)")
        // Each was refused at the 64 KiB handshake limit, not at the 256 MiB frame limit. (How
        // much each attacker could write says little: loopback socket buffers take tens of MiB.)
        // A stranger's failed handshakes are logged once per episode: the first one whole, the
        // others counted by reason every 10 s ("5: a frame of … exceeds the 65536-byte limit").
        try await daemon.waitFor("six refusals in its log", timeout: .seconds(60)) { _, stderr in
            stderr.lines(containing: "exceeds the 65536-byte limit").reduce(0) { total, line in
                let counted = line.firstMatch(of: /\((\d+): a frame of \d+ bytes exceeds the 65536-byte limit/).flatMap { Int($0.1) }
                return total + (counted ?? 1)
            } >= 6
        }
        #expect(peak - baseline < ListrAdversarialTests.memoryGrowthBound, "listrd's peak RSS grew by \(peak - baseline) bytes (from \(baseline)) under six 256 MiB pre-hello frames; the bound is \(ListrAdversarialTests.memoryGrowthBound)")

        // It still serves.
        let list = try await world.ctl("item", "list", "--connect", "127.0.0.1:\(port)", "--insecure")
        #expect(list.exit == .status(0), "\(list)")
    }
}
