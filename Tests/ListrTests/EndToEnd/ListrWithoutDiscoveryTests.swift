import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real `listrd` and `listrctl` where discovery plays no part: start-up checks, and dialling
/// an address given with `--connect`. These run without an avahi-daemon.
@Suite("listrd and listrctl without discovery")
struct ListrWithoutDiscoveryTests {
    @Test("--connect HOST:PORT reaches listrd without discovery")
    func staticAddress() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon()
        let address = "127.0.0.1:\(port)"
        let result = try await world.ctl("item", "add", "Milk", "--connect", address)
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stdout == "Added \"Milk\" as item 1.\n")
        let list = try await world.ctl("item", "list", "--connect", address)
        #expect(list.stdout == "[ ] Milk\n", "\(list)")

        let nobody = try await world.ctl(["item", "list", "--connect", "127.0.0.1:1"], timeout: "1")
        #expect(nobody.exit == .status(69), "\(nobody)")
        #expect(nobody.stderr.contains("answered at 127.0.0.1:1 within 1 s"), "\(nobody)")
    }

    @Test("a store file that is not a store stops listrd at start-up, named, and untouched")
    func foreignStoreFile() async throws {
        let world = try ListrFixture()
        let path = try world.write(Data("my notes\n".utf8), to: "store.sqlite")
        let daemon = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", path, "--listen-host", "127.0.0.1"],
            name: "listrd",
            environment: world.keyEnvironment
        )
        let result = try await daemon.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(70), "\(result)")
        #expect(result.stderr.contains("The file \(path) is not a Listr store"), "\(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("my notes\n".utf8))
    }

    @Test("a second listrd on the same store refuses to start, and the first keeps serving")
    func storeInUse() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon(name: "First")
        let second = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", world.path("store.sqlite"), "--listen-host", "127.0.0.1"],
            name: "second listrd",
            environment: world.keyEnvironment
        )
        let result = try await second.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(70), "\(result)")
        #expect(result.stderr.contains("The store file \(world.path("store.sqlite")) is in use by another listrd."), "\(result)")
        let added = try await world.ctl("item", "add", "Milk", "--connect", "127.0.0.1:\(port)")
        #expect(added.exit == .status(0), "\(added)")
    }

    @Test("SIGINT stops listrd gracefully with status 0")
    func sigint() async throws {
        let world = try ListrFixture()
        let (daemon, _) = try await world.startDaemon()
        daemon.send(SIGINT)
        let result = try await daemon.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(0), "\(result)")
        #expect(result.stderr.contains("stopped"), "\(result)")
    }

    @Test("--connect to something that is not a listrd of this service type fails at once with the handshake's reason")
    func connectToAnotherServiceType() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon(name: "Other", extra: ["--insecure"])
        // The same listrd, asked for under another service type: its handshake refuses us.
        let started = ContinuousClock.now
        let process = try TestProcess.launch(
            try ListrBinaries.url("listrctl"),
            ["item", "list", "--connect", "127.0.0.1:\(port)", "--insecure", "--service-type", "otherlistr", "--timeout", "300"],
            name: "listrctl of another service type",
            environment: world.keyEnvironment
        )
        let result = try await process.waitForExit(timeout: ListrFixture.deadline)
        let elapsed = ContinuousClock.now - started
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.stderr.contains("is not a listrd of service type \"otherlistr\""), "\(result)")
        #expect(result.stderr.contains("service type"), "\(result)")
        // Not the 300 s timeout: the refusal is reported as soon as it arrives (the message above
        // already says so: a timeout says "No listrd … was found"). The bound is generous, as a
        // debug listrctl started on a loaded 2-core machine took 10.5 s once in CI.
        #expect(elapsed < .seconds(60), "listrctl took \(elapsed) to report a refused handshake")
    }

    @Test("a port in use stops listrd at start-up with a sentence naming the address")
    func portInUse() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon(name: "First")
        let second = try TestProcess.launch(
            try ListrBinaries.url("listrd"),
            ["--service-type", world.serviceType, "--store", world.path("other.sqlite"),
             "--listen-host", "127.0.0.1", "--port", "\(port)"],
            name: "second listrd",
            environment: world.keyEnvironment
        )
        let result = try await second.waitForExit(timeout: ListrFixture.deadline)
        #expect(result.exit == .status(70), "\(result)")
        #expect(result.stderr.contains("listrd cannot listen on 127.0.0.1:\(port)"), "\(result)")
        #expect(result.stderr.contains("Choose another --port or --listen-host."), "\(result)")
    }

    @Test("when avahi-daemon cannot be reached, listrctl says so at once and points to --connect")
    func discoveryUnavailable() async throws {
        let world = try ListrFixture()
        let started = ContinuousClock.now
        let process = try TestProcess.launch(
            try ListrBinaries.url("listrctl"),
            ["item", "list", "--service-type", world.serviceType, "--timeout", "60"],
            name: "listrctl without a system bus",
            environment: world.keyEnvironment.merging(["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(world.path("no-bus"))"]) { $1 }
        )
        // Failing at once takes a fraction of a second alone, but up to 15 s was seen while the
        // whole suite starts processes on 2 cores; waiting for the timeout would take 60 s.
        let result = try await process.waitForExit(timeout: .seconds(90))
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.stderr.contains("listrd (service type \"\(world.serviceType)\") cannot be discovered"), "\(result)")
        #expect(result.stderr.contains("--connect HOST:PORT"), "\(result)")
        #expect(ContinuousClock.now - started < .seconds(40), "it waited for its 60 s timeout instead of failing at once")
    }
}
