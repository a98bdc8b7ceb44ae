import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real `listrd` attacked from raw sockets on 127.0.0.1: what a stranger on the network can make
/// it spend (memory read from /proc/PID/status, CPU from /proc/PID/stat) and write to its log.
/// listrd's frame limit was 256 MiB when these were written (stores travelled in one message); it
/// is 16 MiB now (`ListrLimits.maximumMessageLength`, stores travel as resources), so these attacks
/// are larger than anything listrd accepts. listrd runs `--insecure` here, because these attacks are on
/// the plaintext framing and handshake, which with a key sit behind TLS (ListrSecurityTests shows a
/// stranger without the key is refused before any frame is read).
@Suite("listrd under attack from raw sockets")
struct ListrAdversarialTests {
    /// How much a child's resident memory may grow under an attack that PeerKit bounds: well above
    /// the bounded buffers (64 KiB per handshake, 4 MiB inbound per connection) plus allocator
    /// slack, far below what the unbounded behaviour costs (+75 MB to +1.5 GB).
    static let memoryGrowthBound = 64 * 1024 * 1024

    @Test("a 300,000-message flood from one client neither delays another client's requests past 1 s nor grows listrd's memory")
    func floodIsFair() async throws {
        let world = try ListrFixture()
        // notice: the flood's 300,000 "done" lines at info would measure the log, not PeerKit.
        let (daemon, port) = try await world.startDaemon(extra: ["--log-level", "notice", "--insecure"])
        let serviceType = world.serviceType
        let baseline = try ProcStatus.bytes("VmRSS", pid: daemon.pid)

        let flooder = try await blocking {
            let socket = try RawSocket.connect(port: port)
            socket.sayHello(serviceType: serviceType, name: "flooder")
            return socket
        }
        defer { flooder.close() }
        // The flooder reads whatever listrd sends (its pings), so it is never a slow reader.
        let drain = Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while buffer.withUnsafeMutableBytes({ recv(flooder.descriptor, $0.baseAddress!, $0.count, 0) }) > 0 {}
        }
        drain.start()
        let floodFinished = Flag()
        let written = Counter()
        let flood = Task {
            defer { floodFinished.set() }
            return try await blocking { () -> Int in
                // 300,000 small messages without an id (nothing is answered), written in batches;
                // TCP flow control blocks the writes while listrd is not reading.
                let message = RawSocket.frame(#"{"type":"ListItemsCommand","payload":{}}"#)
                let batch = Array([[UInt8]](repeating: message, count: 1000).joined())
                while written.value < 300_000, flooder.write(batch) { written.add(1000) }
                return written.value
            }
        }

        // Meanwhile a second client asks for the list ten times a second and times each answer.
        let client = try await blocking {
            let socket = try RawSocket.connect(port: port)
            socket.setTimeout(seconds: 10)
            socket.sayHello(serviceType: serviceType, name: "patient client")
            return socket
        }
        defer { client.close() }
        var latencies: [Double] = []
        var unanswered = 0
        let started = ContinuousClock.now
        var number = 0
        // For 8 s of the flood (a debug listrd on a busy machine takes minutes for all of it),
        // or until it is all written and at least 40 requests were timed: over 60 requests
        // timed while the flood runs.
        while ContinuousClock.now - started < .seconds(8) {
            number += 1
            let id = "request-\(number)"
            let answer = try await blocking { () -> (String?, Double) in
                let start = Date()
                client.write(RawSocket.frame(#"{"type":"ListItemsCommand","id":"\#(id)","payload":{}}"#))
                while let frame = client.readMessage() {
                    if RawSocket.value(of: "replyTo", in: frame) == id { return (frame, Date().timeIntervalSince(start)) }
                }
                return (nil, Date().timeIntervalSince(start))
            }
            if answer.0 == nil { unanswered += 1; break } else { latencies.append(answer.1) }
            if floodFinished.isSet && latencies.count >= 40 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let peak = try ProcStatus.bytes("VmHWM", pid: daemon.pid)
        let (finishedInWindow, writtenInWindow) = (floodFinished.isSet, written.value)
        shutdown(flooder.descriptor, Int32(SHUT_RDWR))  // ends the flood's blocked write
        _ = try await flood.value

        #expect(!finishedInWindow || writtenInWindow == 300_000, "listrd closed the flooding connection after \(writtenInWindow) messages; a fast sender is slowed by TCP, not disconnected. listrd said: \(daemon.stderr.lines(containing: "flooder"))")
        #expect(writtenInWindow >= 10_000, "listrd took only \(writtenInWindow) messages of the flood in 8 s")
        #expect(unanswered == 0, "request \(number) of the second client got no answer within 10 s during the flood (\(writtenInWindow) flood messages written)")
        let slowest = latencies.max() ?? .infinity
        #expect(slowest < 1.0, "the second client's slowest answer during a 300,000-message flood took \(slowest) s (of \(latencies.count) requests while \(writtenInWindow) flood messages were written; median \(latencies.sorted().dropFirst(latencies.count / 2).first ?? 0) s); the bound is 1 s")
        #expect(peak - baseline < Self.memoryGrowthBound, "listrd's peak RSS grew by \(peak - baseline) bytes (from \(baseline)) during a 300,000-message flood; the bound is \(Self.memoryGrowthBound)")
    }

    @Test("2,000 idle connections are refused over the handshake cap with one log line per episode, and a real client gets in")
    func idleConnections() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        let serviceType = world.serviceType
        let baseline = try ProcStatus.bytes("VmRSS", pid: daemon.pid)
        let cpuBefore = try ProcStatus.cpuSeconds(pid: daemon.pid)
        let clockBefore = ContinuousClock.now

        let descriptorsBefore = ProcStatus.openDescriptors(pid: daemon.pid)
        let idle = try await blocking { try (0..<2000).map { _ in try RawSocket.connect(port: port, waitForConnection: false) } }
        defer { idle.forEach { $0.close() } }
        // For 6 s (past the 2 s pre-handshake timeout, which closes a connection that says
        // nothing, and the 5 s handshake timeout) sample how many descriptors listrd holds and how
        // many of the idle connections it has closed (all 2,000 within 2.1 s, measured). Some
        // connections may never be accepted at all (the kernel's accept queue holds 256), so "all
        // closed" is not the measure: what listrd holds is.
        let (mostDescriptors, closed) = try await blocking { () -> (Int, Int) in
            let deadline = Date().addingTimeInterval(6)
            var open = Set(idle.map(\.descriptor))
            var most = 0
            while Date() < deadline {
                most = max(most, ProcStatus.openDescriptors(pid: daemon.pid))
                for descriptor in open where RawSocket(descriptor: descriptor).closedByPeer(within: 0.001) { open.remove(descriptor) }
                usleep(100_000)
            }
            return (most, idle.count - open.count)
        }
        let cpu = try ProcStatus.cpuSeconds(pid: daemon.pid) - cpuBefore
        let elapsed = (ContinuousClock.now - clockBefore) / .seconds(1)
        // 64 pending handshakes, plus those accepted over the cap and not yet closed at that
        // moment: the listening loop accepts in bursts and hands each connection to another event
        // loop, which refuses and closes it when it next runs. That second part grows with how
        // busy the machine is (up to 77 measured on 2 cores while a release build ran), not with
        // the attack, whereas without the cap every idle connection would be held for the 5 s
        // handshake timeout: up to 2,000.
        #expect(mostDescriptors - descriptorsBefore <= 64 + 192, "listrd held up to \(mostDescriptors) descriptors (\(descriptorsBefore) before) with 2,000 idle connections; 64 pending handshakes (and up to 192 accepted and being closed) are allowed")
        #expect(closed >= 1000, "listrd closed only \(closed) of 2,000 connections that never sent a hello within 6 s")
        #expect(cpu < elapsed * 0.8, "listrd used \(cpu) s of CPU in \(elapsed) s handling 2,000 idle connections")

        // A real client is served once the strangers are gone.
        let answer = try await blocking { () -> String? in
            let socket = try RawSocket.connect(port: port)
            defer { socket.close() }
            socket.setTimeout(seconds: 20)
            socket.sayHello(serviceType: serviceType, name: "real client")
            socket.write(RawSocket.frame(#"{"type":"ListItemsCommand","id":"1","payload":{}}"#))
            while let frame = socket.readMessage() {
                if !frame.contains("peerkit.hello") { return frame }
            }
            return nil
        }
        #expect(answer?.contains("\"replyTo\":\"1\"") == true, "a real client got \(answer ?? "no answer") from listrd after 2,000 idle connections")

        let peak = try ProcStatus.bytes("VmHWM", pid: daemon.pid)
        #expect(peak - baseline < Self.memoryGrowthBound, "listrd's peak RSS grew by \(peak - baseline) bytes under 2,000 idle connections")
        let log = daemon.stderr
        let refusing = log.lines(containing: "Refusing new connections")
        let resumed = log.lines(containing: "Accepting connections again")
        #expect(refusing.count >= 1, "listrd logged nothing about refusing connections over its limits:\n\(log.suffix(4000))")
        #expect(refusing.count <= 3 && refusing.count <= resumed.count + 1, "listrd logged \(refusing.count) refusal lines and \(resumed.count) resumption lines for 2,000 idle connections; one per episode was expected:\n\(log.suffix(4000))")
    }

    @Test("at a low descriptor limit listrd caps its connections to fit, refuses the rest without spinning, logs once per episode, and a client gets in afterwards")
    func descriptorLimit() async throws {
        let world = try ListrFixture()
        let prlimit = try #require(["/usr/bin/prlimit", "/bin/prlimit"].first(where: FileManager.default.isExecutableFile),
                                   "prlimit (util-linux) is needed to start listrd with few file descriptors")
        let listrd = try ListrBinaries.url("listrd")
        // 48 descriptors: far under the 512 connections and 64 pending handshakes configured, so
        // without a cap that fits the limit idle strangers exhaust the descriptors, and accept()
        // fails with EMFILE while their connections wait in the backlog: the event loop spins.
        let daemon = try TestProcess.launch(URL(fileURLWithPath: prlimit), [
            "--nofile=48:48", "--", listrd.path, "--service-type", world.serviceType, "--name", "fd limit",
            "--store", world.path("store.sqlite"), "--listen-host", "127.0.0.1", "--insecure",
        ], name: "listrd (48 descriptors)")
        defer { daemon.send(SIGKILL) }
        try await daemon.waitFor("its ready line", timeout: ListrFixture.deadline) { _, stderr in stderr.contains("serving \"fd limit\"") }
        let stderr = daemon.stderr
        let port = try #require(stderr.range(of: " on port ").flatMap { Int(stderr[$0.upperBound...].prefix { $0.isNumber }) }, "\(stderr)")
        let lowered = stderr.lines(containing: "PeerConfiguration.maximumConnections (512) is lowered to")
        #expect(lowered.count == 1, "listrd did not say that its descriptor limit lowers its connection cap:\n\(stderr.suffix(4000))")

        let idle = try await blocking { try (0..<300).map { _ in try RawSocket.connect(port: port, waitForConnection: false) } }
        // Measure 3 s while the cap is reached (before the 5 s handshake timeout frees it).
        try await Task.sleep(for: .milliseconds(500))
        let cpuBefore = try ProcStatus.cpuSeconds(pid: daemon.pid)
        let descriptors = ProcStatus.openDescriptors(pid: daemon.pid)
        try await Task.sleep(for: .seconds(3))
        let cpu = try ProcStatus.cpuSeconds(pid: daemon.pid) - cpuBefore
        // A listrd that refuses uses next to nothing; one that spins on accept uses a core (less
        // when the machine is busy, so the bound is well below one core).
        #expect(cpu < 0.75, "listrd used \(cpu) s of CPU in 3 s with its connections at the cap (\(descriptors) descriptors open of 48): it spins on accept")
        // (Descriptors may still run out for a moment: a burst of accepted connections holds
        // descriptors until their closes run. What must not happen is spinning, checked above.)
        let log = daemon.stderr
        // Accepting and closing 300 connections in a burst can still meet EMFILE for a moment;
        // that is one episode, logged once.
        let acceptFailures = log.lines(containing: "Accepting a connection on")
        #expect(acceptFailures.count <= 1, "listrd logged \(acceptFailures.count) accept failures in one episode; once was expected:\n\(log.suffix(4000))")
        // An episode ends when a connection ends (the 5 s handshake timeout frees the cap's slots).
        let refusing = log.lines(containing: "Refusing new connections")
        let resumed = log.lines(containing: "Accepting connections again")
        #expect(refusing.count >= 1 && refusing.count <= resumed.count + 1, "listrd logged \(refusing.count) refusal lines and \(resumed.count) resumption lines; one per episode was expected:\n\(log.suffix(4000))")

        // The strangers leave: a real client gets in.
        idle.forEach { $0.close() }
        let list = try await world.ctl("item", "list", "--connect", "127.0.0.1:\(port)", "--insecure")
        #expect(list.exit == .status(0), "\(list)")
    }

    @Test("a hello whose name holds a newline cannot forge a log line, and an over-long name is refused")
    func controlCharactersInName() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        let serviceType = world.serviceType
        let reply = try await blocking { () -> String? in
            let socket = try RawSocket.connect(port: port)
            defer { socket.close() }
            socket.setTimeout(seconds: 20)
            socket.sayHello(serviceType: serviceType, name: "evil\nFORGED critical : listrd was hacked\u{1B}[31m")
            socket.write(RawSocket.frame(#"{"type":"ListItemsCommand","id":"1","payload":{}}"#))
            while let frame = socket.readMessage() {
                if !frame.contains("peerkit.hello") { return frame }
            }
            return nil
        }
        #expect(reply?.contains("\"replyTo\":\"1\"") == true, "listrd did not answer a peer whose name holds control characters: \(reply ?? "nothing")")
        try await daemon.waitFor("a log line naming the peer", timeout: ListrFixture.deadline) { _, stderr in stderr.contains("evil") }
        let log = daemon.stderr
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix("FORGED") }, "a newline in a peer's name started a log line of its own:\n\(log)")
        #expect(log.contains(#"evil\nFORGED"#), "the newline in a peer's name was not logged escaped as \\n:\n\(log)")
        #expect(!log.contains("\u{1B}"), "an escape character from a peer's name reached listrd's log:\n\(log)")

        // 64 bytes is one more than a DNS-SD instance name; 4 MiB is over the 64 KiB handshake frame limit.
        for name in [String(repeating: "n", count: 64), String(repeating: "n", count: 4 * 1024 * 1024)] {
            let closed = try await blocking { () -> (Bool, String?) in
                let socket = try RawSocket.connect(port: port)
                defer { socket.close() }
                socket.setTimeout(seconds: 20)
                socket.sayHello(serviceType: serviceType, name: name)
                socket.write(RawSocket.frame(#"{"type":"ListItemsCommand","id":"1","payload":{}}"#))
                var frames: [String] = []
                while let frame = socket.readFrame() { frames.append(frame) }
                return (true, frames.first { $0.contains("replyTo") })
            }
            #expect(closed.1 == nil, "listrd answered a peer whose name is \(name.utf8.count) bytes long: \(closed.1 ?? "")")
        }
        let longest = daemon.stderr.split(separator: "\n").map(\.utf8.count).max() ?? 0
        #expect(longest < 2048, "listrd logged a line of \(longest) bytes after a hello with a 4 MiB name")
    }
}
