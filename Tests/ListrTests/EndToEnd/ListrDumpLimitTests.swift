import Foundation
import ListrKit
import PeerKit
import Synchronization
import Testing

/// The real `listrd` and an in-process PeerKit client that asks for dumps and holds them unread:
/// listrd sends at most ``ListrLimits/maximumConcurrentDumpsPerAddress`` at once to one address
/// (the limit of all addresses together, ``ListrLimits/maximumConcurrentDumps``, is attacked
/// from three addresses in `ListrLimitsAdversarialTests`).
@Suite("listrd's concurrent dumps, end to end")
struct ListrDumpLimitTests {
    /// Holds the client's resource handlers until opened.
    private final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

        func wait() async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }

        func open() {
            let waiters = state.withLock { state in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    @Test("a request for a dump beyond the limit is answered with a sentence, and served again once a dump has arrived")
    func concurrentDumps() async throws {
        let world = try ListrFixture()
        let (_, port) = try await world.startDaemon(extra: ["--insecure"])
        var configuration = PeerConfiguration(serviceType: world.serviceType)
        configuration.advertises = false
        configuration.peerName = "dumper"
        configuration.discovery = .staticPeers([PeerEndpoint(host: "127.0.0.1", port: port)])
        // Room to take every dump listrd may send at once, and one more.
        configuration.maximumConcurrentIncomingResources = ListrLimits.maximumConcurrentDumps + 1
        configuration.maximumConcurrentIncomingResourcesPerPeer = ListrLimits.maximumConcurrentDumps + 1
        let client = PeerTransceiver(configuration: configuration)
        let gate = Gate()
        client.receiveResources(named: ListrResources.dump) { resource in
            await gate.wait()
            for try await _ in resource.chunks {}
        }
        try await client.start()
        defer { client.stop() }
        let daemon = try await client.waitForPeer(timeout: ListrFixture.deadline)

        func dump() async throws -> CLIResponse {
            try await client.request(DumpDatabaseCommand(asResource: true), to: daemon, expecting: CLIResponse.self, timeout: ListrFixture.deadline)
        }
        // Held unread, so each keeps its slot (well within listrd's 30 s stall timeout).
        for index in 1...ListrLimits.maximumConcurrentDumpsPerAddress {
            let answer = try await dump()
            guard case let .message(text) = answer, text.hasPrefix("Sending the list") else {
                Issue.record("dump \(index) was answered \(answer)")
                return
            }
        }
        #expect(try await dump() == .error("listrd is already sending 3 dumps to 127.0.0.1, its limit for one address (ListrLimits.maximumConcurrentDumpsPerAddress); try again once one has arrived."))

        // Read, they complete and free their slots.
        gate.open()
        let deadline = ContinuousClock.now + ListrFixture.deadline
        var last = CLIResponse.error("no answer")
        while ContinuousClock.now < deadline {
            last = try await dump()
            if case let .message(text) = last, text.hasPrefix("Sending the list") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard case let .message(text) = last else {
            Issue.record("no dump was served again once the others arrived; the last answer: \(last)")
            return
        }
        #expect(text.hasPrefix("Sending the list"))
    }
}
