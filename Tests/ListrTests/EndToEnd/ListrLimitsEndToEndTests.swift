import Foundation
import ListrKit
import PeerKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The limits of issue 30 against the real listrd and listrctl: nothing untrusted reaches the
/// terminal raw, a title and the store have a maximum size, a list larger than one message still
/// lists, a connection cut during the handshake is not called a wrong key, and a key file that
/// cannot be used stops listrd before it creates its store.
@Suite("Listr limits, end to end")
struct ListrLimitsEndToEndTests {
    /// A peer name with an OSC that sets the window title, a BEL, a CSI that clears the screen,
    /// a line feed followed by a forged line, and a right-to-left override: 63 bytes at most.
    static let hostileName = "x\u{1B}]0;PWNED\u{07}\u{1B}[2J\nfake line added\u{202E}"
    /// A title with what a title may hold (no control character) but a terminal should not act
    /// on: a right-to-left override, a line separator, a zero-width space.
    static let hostileTitle = "Milk\u{202E}klim\u{2028}forged line\u{200B}"

    /// A client made in process with the scenario's key, under a name of the test's choosing,
    /// connected to the daemon at `port`: what an attacker who holds the key can do.
    private static func client(_ world: ListrFixture, port: Int, name: String) async throws -> (PeerTransceiver, Peer) {
        var configuration = PeerConfiguration(serviceType: world.serviceType)
        configuration.advertises = false
        configuration.peerName = name
        configuration.maximumFrameLength = ListrLimits.maximumMessageLength
        configuration.security = .preSharedKey(try PeerKey(contentsOfFile: world.path("key")))
        configuration.discovery = .staticPeers([PeerEndpoint(host: "127.0.0.1", port: port)])
        let transceiver = PeerTransceiver(configuration: configuration)
        try await transceiver.start()
        let daemon = try await transceiver.waitForPeer(timeout: .seconds(30)) { _ in true }
        return (transceiver, daemon)
    }

    /// Whether `text` holds a character a terminal would act on or that hides or reorders text.
    private static func hasRawControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            switch scalar.properties.generalCategory {
            case .control: scalar != "\n"
            case .format, .lineSeparator, .paragraphSeparator: true
            default: false
            }
        }
    }

    @Test("a client name and a title with ESC]0;…BEL, ESC[2J, a forged line and U+202E are shown escaped by listrctl watch and item list")
    func escapes() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        let watcher = try world.launchCtl(["watch"] + at)
        try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in stdout.contains("Watching") }

        let (transceiver, daemon) = try await Self.client(world, port: port, name: Self.hostileName)
        let answer = try await transceiver.request(AddItemCommand(title: Self.hostileTitle), to: daemon, expecting: CLIResponse.self, timeout: .seconds(30))
        await transceiver.shutdown()
        #expect(answer == .message("Added \"\(Self.hostileTitle)\" as item 1."))

        try await watcher.waitFor("the add", timeout: ListrFixture.deadline) { stdout, _ in stdout.contains("as item 1.") }
        watcher.send(SIGINT)
        let watched = try await watcher.waitForExit(timeout: ListrFixture.deadline)
        let line = try #require(watched.stdout.split(separator: "\n").first { $0.contains("as item 1.") })
        #expect(line == #"x\u{1B}]0;PWNED\u{7}\u{1B}[2J\nfake line added\u{202E} added "Milk\u{202E}klim\u{2028}forged line\u{200B}" as item 1."#)
        #expect(!Self.hasRawControl(watched.stdout), "\(watched.stdout.debugDescription)")
        #expect(!watched.stdout.split(separator: "\n").contains { $0.hasPrefix("fake line") }, "a line was forged: \(watched.stdout.debugDescription)")

        let list = try await world.ctl(["item", "list"] + at)
        #expect(list.exit == .status(0), "\(list)")
        #expect(list.stdout == #"[ ] Milk\u{202E}klim\u{2028}forged line\u{200B}"# + "\n")
        let done = try await world.ctl(["item", "done", "1"] + at)
        #expect(done.stdout == #"Marked item 1, "Milk\u{202E}klim\u{2028}forged line\u{200B}", as done."# + "\n", "\(done)")
    }

    @Test("an instance name advertised with ESC, OSC, BEL and a newline (no key needed) is shown escaped in \"the ones found are …\"")
    func hostileAdvertisement() async throws {
        try await ListrFixture.requireAvahi()
        let world = try ListrFixture()
        // The scenario's key, so that the advertisement (with its key id, which is public) is
        // dialled like a listrd: nothing answers on its port, and it is listed among those found.
        let key = PeerKey.random()
        let keyPath = try world.write(Data((key.hexEncodedSecret + "\n").utf8), to: "key")
        chmod(keyPath, 0o600)
        let name = "evil\u{1B}]0;PWNED\u{07}\nfake line\u{202E}"
        let publisher = try TestProcess.launch(
            URL(fileURLWithPath: "/usr/bin/avahi-publish"),
            ["-s", name, "_\(world.serviceType)._tcp", "9", "sec=psk", "keyid=\(key.keyID)", "peerid=evil", "proto=1"],
            name: "avahi-publish evil"
        )
        defer { publisher.send(SIGKILL) }
        try await publisher.waitFor("the advertisement", timeout: ListrFixture.deadline) { stdout, stderr in
            (stdout + stderr).contains("Established")
        }
        let result = try await world.ctl(["item", "list", "--peer", "nobody"], timeout: "3")
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.stderr.contains(#"the ones found are "evil\u{1B}]0;PWNED\u{7}\nfake line\u{202E}""#), "\(result.stderr.debugDescription)")
        #expect(!Self.hasRawControl(result.stderr.replacingOccurrences(of: "\n", with: " ")), "\(result.stderr.debugDescription)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr.debugDescription)")
    }

    @Test("a 9 MiB title is refused with a sentence, and item list and watch go on working for everyone")
    func hugeTitle() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        let (transceiver, daemon) = try await Self.client(world, port: port, name: "big titles")
        for _ in 0..<2 {
            let answer = try await transceiver.request(
                AddItemCommand(title: String(repeating: "x", count: 9 * 1024 * 1024)), to: daemon, expecting: CLIResponse.self, timeout: .seconds(60)
            )
            #expect(answer == .error("The title is 9437184 bytes long, and a title may have at most 4096 bytes (UTF-8). Nothing was changed; give a shorter title."))
        }
        await transceiver.shutdown()
        let list = try await world.ctl(["item", "list"] + at)
        #expect(list.exit == .status(0), "\(list)")
        #expect(list.stdout == "The list is empty.\n")
    }

    @Test("a list larger than one message (4,000 titles of 4,000 bytes, 16 MB) is listed whole by item list, item list --json and watch")
    func listLargerThanAFrame() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let at = ["--connect", "127.0.0.1:\(port)"]
        let items = (1...4000).map { Item(title: String(format: "%04d ", $0) + String(repeating: "y", count: 3995)) }
        let file = try world.write(try ItemPropertyList.encode(items), to: "big.plist")
        let replaced = try await world.ctl(["store", "replace", file] + at)
        #expect(replaced.exit == .status(0), "\(replaced)")

        let list = try await world.ctl(["item", "list"] + at)
        #expect(list.exit == .status(0), "\(list.exit) \(list.stderr)")
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 4000)
        #expect(lines.first == "[ ] " + items[0].title[...])
        #expect(lines.last == "[ ] " + items[3999].title[...])

        let json = try await world.ctl(["item", "list", "--json"] + at)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stderr)")
        let listed = try #require(object["items"] as? [[String: Any]])
        #expect(listed.count == 4000)
        #expect(listed.last?["index"] as? Int == 4000)

        let watcher = try world.launchCtl(["watch", "--json"] + at)
        try await watcher.waitFor("the list", timeout: ListrFixture.deadline) { stdout, _ in stdout.contains("\n") }
        watcher.send(SIGINT)
        let watched = try await watcher.waitForExit(timeout: ListrFixture.deadline)
        let first = try #require(watched.stdout.split(separator: "\n").first)
        let event = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        #expect((event["items"] as? [[String: Any]])?.count == 4000, "\(watched.stderr)")
    }

    @Test("a server that closes the connection during the TLS handshake is dialled again until the timeout, then not reported as a wrong key (exit 69, not 77)")
    func handshakeCutShort() async throws {
        let world = try ListrFixture()
        // What listrd does when its handshake slots are full: accept, then close at once.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        #expect(bound == 0)
        #expect(listen(listener, 64) == 0)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let descriptor = listener
        let closer = Thread {
            while true {
                let connection = accept(descriptor, nil, nil)
                if connection < 0 { return }
                close(connection)
            }
        }
        closer.start()

        let started = ContinuousClock.now
        let result = try await world.ctl(["item", "list", "--connect", "127.0.0.1:\(port)"], timeout: "2")
        let elapsed = ContinuousClock.now - started
        shutdown(listener, Int32(SHUT_RDWR))
        #expect(elapsed >= .seconds(1.5), "listrctl gave up after \(elapsed) instead of dialling again until its 2 s timeout")
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.stderr.contains("closed the connection during the TLS handshake, before any key was checked"), "\(result)")
        #expect(!result.stderr.contains("same key file"), "\(result)")
    }

    @Test("listrd refuses a key file that is a folder before it creates its store or the store's folder")
    func keyCheckedBeforeStore() async throws {
        let world = try ListrFixture()
        let keyFolder = world.path("key")
        try FileManager.default.createDirectory(atPath: keyFolder, withIntermediateDirectories: false)
        try ListrFixture.giveToTestUser(keyFolder)
        let store = world.path("state/store.sqlite")
        let daemon = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", store, "--listen-host", "127.0.0.1"],
            name: "listrd", environment: world.keyEnvironment
        )
        let result = try await daemon.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(78), "\(result)")
        #expect(result.stderr.contains("The key file \(keyFolder) is a folder, not a file"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: world.path("state")), "listrd created the store's folder before refusing its key")
    }
}
