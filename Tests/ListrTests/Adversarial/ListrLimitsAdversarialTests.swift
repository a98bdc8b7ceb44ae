import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 30's Listr items attacked as a client would, with raw sockets against the real listrd
/// (`--insecure`: these attacks are on Listr's own limits, which hold for key holders too).
@Suite("Listr limits under attack", .serialized)
struct ListrLimitsAdversarialTests {
    /// Sends `count` frames of `json(i)` on `socket` while a thread reads (and counts) the replies;
    /// returns once every one was answered or the connection ended.
    private static func sendAndCount(_ socket: RawSocket, count: Int, _ json: @escaping @Sendable (Int) -> String) async throws -> Int {
        let answered = Counter()
        let reader = Thread {
            while let frame = socket.readMessage() {
                if frame.contains("\"replyTo\"") { answered.add(1) }
                if answered.value >= count { return }
            }
        }
        reader.start()
        try await blocking {
            var batch: [UInt8] = []
            for index in 0..<count {
                batch += RawSocket.frame(json(index))
                if batch.count > 256 * 1024 || index == count - 1 {
                    guard socket.write(batch) else { return }
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        let deadline = ContinuousClock.now + .seconds(120)
        while answered.value < count, ContinuousClock.now < deadline, !reader.isFinished {
            try await Task.sleep(for: .milliseconds(50))
        }
        return answered.value
    }

    /// Asks listrd for `count` dumps as resources on `socket` and returns its answers, in order;
    /// the resources it then offers are never accepted, so each dump holds its slot.
    private static func askForDumps(_ socket: RawSocket, count: Int, tag: String) async throws -> [String] {
        try await blocking {
            var requests: [UInt8] = []
            for index in 0..<count {
                requests += RawSocket.frame(#"{"type":"DumpDatabaseCommand","id":"\#(tag)-\#(index)","payload":{"asResource":true}}"#)
            }
            guard socket.write(requests) else { return ["the connection closed before the requests were written"] }
            var answers: [String] = []
            while answers.count < count, let frame = socket.readMessage() {
                if frame.contains("\"replyTo\"") { answers.append(frame) }
            }
            return answers
        }
    }

    /// A raw client from `source`, claiming `peerID`, that lists the resources feature.
    private static func dumpClient(port: Int, from source: String, peerID: String, serviceType: String) async throws -> RawSocket {
        try await blocking {
            let socket = try RawSocket.connect(port: port, from: source)
            socket.setTimeout(seconds: 30)
            socket.sayHello(serviceType: serviceType, name: peerID, peerID: peerID, features: ["resources"])
            return socket
        }
    }

    @Test("two connections from one address, claiming two peer IDs, hold at most 3 of listrd's 4 dump slots; a client from another address gets the last, and a third address none")
    func dumpSlotsByAddress() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon(extra: ["--insecure"])
        let serviceType = world.serviceType
        let first = try await Self.dumpClient(port: port, from: "127.0.0.1", peerID: "claimed-1", serviceType: serviceType)
        let second = try await Self.dumpClient(port: port, from: "127.0.0.1", peerID: "claimed-2", serviceType: serviceType)
        defer { first.close(); second.close() }
        let answers = try await Self.askForDumps(first, count: 2, tag: "a") + (try await Self.askForDumps(second, count: 2, tag: "b"))
        #expect(answers.count == 4, "\(answers)")
        #expect(answers.prefix(3).allSatisfy { $0.contains("Sending the list") }, "\(answers)")
        #expect(answers.last?.contains("listrd is already sending 3 dumps to 127.0.0.1, its limit for one address (ListrLimits.maximumConcurrentDumpsPerAddress)") == true,
                "the fourth dump for one address (two connections, two peer IDs) was answered: \(answers.last ?? "nothing")")

        let other = try await Self.dumpClient(port: port, from: "127.0.0.2", peerID: "other", serviceType: serviceType)
        defer { other.close() }
        let answer = try await Self.askForDumps(other, count: 1, tag: "c")
        #expect(answer.first?.contains("Sending the list") == true, "a client from another address was answered \(answer) while one address held 3 of the 4 dump slots")

        // Every slot is taken now: a third address is refused by the limit of all together.
        let third = try await Self.dumpClient(port: port, from: "127.0.0.3", peerID: "third", serviceType: serviceType)
        defer { third.close() }
        let refused = try await Self.askForDumps(third, count: 1, tag: "d")
        #expect(refused.first?.contains("listrd is already sending 4 dumps, its limit; try again once one has arrived.") == true, "\(refused)")
    }

    @Test("20,000 refused requests from one peer make two log lines: the first refusal, then the count once the series ends")
    func refusalFlood() async throws {
        let world = try ListrFixture()
        // A series ends after 3 s without a refusal, not 10: the wait for its count is shorter,
        // and a pause of 3 s within the flood would still split it (and fail the test).
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure", "--refusal-quiet-period", "3"])
        let serviceType = world.serviceType
        let socket = try await blocking {
            let socket = try RawSocket.connect(port: port)
            socket.setTimeout(seconds: 30)
            socket.sayHello(serviceType: serviceType, name: "refused a lot")
            return socket
        }
        defer { socket.close() }
        let total = 20_000
        let answered = try await Self.sendAndCount(socket, count: total) { #"{"type":"RemoveItemCommand","id":"r\#($0)","payload":{"index":99}}"# }
        #expect(answered == total, "listrd answered \(answered) of \(total) requests")
        try await daemon.waitFor("the count of the series", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("more requests from")
        }
        let refusals = daemon.stderr.lines(containing: "refused: There is no item 99")
        #expect(refusals.count == 1, "listrd logged \(refusals.count) refusals one by one")
        let counts = daemon.stderr.lines(containing: "more requests from")
        #expect(counts.count == 1)
        #expect(counts.first?.contains("refused \(total - 1) more requests from") == true, "\(counts)")
        #expect(counts.first?.contains("refused a lot") == true, "\(counts)")
    }

    @Test("refusals from 20 made-up peer IDs at one address are one series: one line at notice, not one per ID")
    func refusalSeriesByAddress() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        let serviceType = world.serviceType
        func refusedOnce(from source: String, peerID: String, index: Int) async throws {
            let socket = try await blocking {
                let socket = try RawSocket.connect(port: port, from: source)
                socket.setTimeout(seconds: 30)
                socket.sayHello(serviceType: serviceType, name: peerID, peerID: peerID)
                return socket
            }
            defer { socket.close() }
            let answered = try await Self.sendAndCount(socket, count: 1) { _ in #"{"type":"RemoveItemCommand","id":"r","payload":{"index":\#(index)}}"# }
            #expect(answered == 1, "\(peerID) got no answer")
        }
        for id in 0..<20 {
            try await refusedOnce(from: "127.0.0.1", peerID: "made-up-\(id)", index: 99)
        }
        // Another address starts a series of its own, logged at notice: once its line is in,
        // every line before it is too.
        try await refusedOnce(from: "127.0.0.2", peerID: "elsewhere", index: 98)
        try await daemon.waitFor("the other address's refusal", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("refused: There is no item 98")
        }
        let refusals = daemon.stderr.lines(containing: "refused: There is no item 99")
        #expect(refusals.count == 1, "listrd logged \(refusals.count) refusals at notice from one address: \(refusals)")
    }

    @Test("a watcher that never reads while 1,500 items of 4,000 bytes are added is dropped, listrd's memory stays bounded, and others are served")
    func neverReadingWatcher() async throws {
        let world = try ListrFixture()
        let (daemon, port) = try await world.startDaemon(extra: ["--insecure"])
        let serviceType = world.serviceType
        let baseline = try ProcStatus.bytes("VmRSS", pid: daemon.pid)
        // The watcher takes the list it is answered, then never reads again (a small receive
        // buffer, so that the kernel holds little for it).
        let watcher = try await blocking { () -> RawSocket in
            let socket = try RawSocket.connect(port: port)
            var size: Int32 = 4096
            setsockopt(socket.descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            socket.setTimeout(seconds: 30)
            socket.sayHello(serviceType: serviceType, name: "never reads")
            socket.write(RawSocket.frame(#"{"type":"WatchCommand","id":"w","payload":{}}"#))
            while let frame = socket.readMessage() {
                if frame.contains("\"replyTo\":\"w\"") { break }
            }
            return socket
        }
        defer { watcher.close() }
        let adder = try await blocking {
            let socket = try RawSocket.connect(port: port)
            socket.setTimeout(seconds: 30)
            socket.sayHello(serviceType: serviceType, name: "adder")
            return socket
        }
        defer { adder.close() }
        let title = String(repeating: "t", count: 3990)
        let total = 1500
        let answered = try await Self.sendAndCount(adder, count: total) { #"{"type":"AddItemCommand","id":"a\#($0)","payload":{"title":"\#($0) \#(title)"}}"# }
        #expect(answered == total, "listrd answered \(answered) of \(total) adds")
        // Dropped for falling behind (logged with the sentence), or disconnected by PeerKit for
        // not reading: either way it no longer costs listrd anything.
        // Which comes first depends on how much the kernel's send buffer takes before the
        // watcher's queue fills: a run measured it disconnected for not answering pings 2.5 s in.
        try await daemon.waitFor("the watcher dropped", timeout: ListrFixture.deadline) { _, stderr in
            stderr.contains("because it fell behind") || stderr.contains("\"never reads\" (") && stderr.contains("stopped watching")
        }
        let peak = try ProcStatus.bytes("VmHWM", pid: daemon.pid)
        #expect(peak - baseline < 64 * 1024 * 1024, "listrd's peak RSS grew by \(peak - baseline) bytes while a watcher did not read")
        let list = try await world.ctl("item", "list", "--limit", "1", "--connect", "127.0.0.1:\(port)", "--insecure")
        #expect(list.exit == .status(0), "\(list)")
        #expect(list.stdout.hasPrefix("[ ] 0 t"), "\(list.stdout.prefix(80))")
    }
}
