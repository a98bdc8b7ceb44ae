import Foundation
import ListrKit
import PeerKit

/// One daemon, found and connected: sends it commands and turns its answers into values.
struct ListrClient {
    /// The options the command was given.
    let options: ClientOptions
    /// How to print.
    let output: Output
    private let transceiver: PeerTransceiver
    private let daemon: Peer

    /// How long to wait, after the first daemon is connected, for other daemons to connect too.
    ///
    /// avahi-daemon answers a browse from its cache, so every daemon it knows is reported within
    /// milliseconds of the first, and PeerKit dials each at once; on a local network a connection
    /// and its handshake take a few milliseconds more. Only daemons that connect count: an
    /// advertisement that outlives its daemon (mDNS keeps a withdrawn record for a second) is
    /// not a candidate.
    static let otherDaemonsGracePeriod: Duration = .milliseconds(250)

    /// Starts a transceiver that only dials, and waits for the daemon to use: the one named by
    /// `--peer`, or the only one there is.
    static func connect(_ options: ClientOptions) async throws(ListrCtlError) -> ListrClient {
        var configuration = PeerConfiguration(serviceType: options.serviceType)
        configuration.advertises = false
        configuration.peerName = "listrctl"
        configuration.logger = options.peerKitLogger
        if !options.endpoints.isEmpty {
            configuration.discovery = .staticPeers(options.endpoints)
        }
        let transceiver = PeerTransceiver(configuration: configuration)
        do {
            try await transceiver.start()
            let daemon = try await findDaemon(on: transceiver, options: options)
            return ListrClient(options: options, output: Output(json: options.json), transceiver: transceiver, daemon: daemon)
        } catch {
            transceiver.stop()
            throw ListrCtlError(error)
        }
    }

    private static func findDaemon(on transceiver: PeerTransceiver, options: ClientOptions) async throws -> Peer {
        let timeout = options.timeoutDuration
        if let name = options.peer {
            do {
                return try await transceiver.waitForPeer(timeout: timeout) { $0.name == name }
            } catch PeerKitError.noPeerFound {
                throw ListrCtlError.noDaemonNamed(name, serviceType: options.serviceType, timeout: timeout, available: names(of: transceiver.availablePeers))
            }
        }
        let first: Peer
        do {
            first = try await transceiver.waitForPeer(timeout: timeout)
        } catch PeerKitError.noPeerFound {
            throw ListrCtlError.noDaemon(serviceType: options.serviceType, timeout: timeout, addresses: options.endpoints)
        }
        if options.endpoints.count == 1 {
            return first  // one address given: there is nothing else to notice
        }
        try await Task.sleep(for: otherDaemonsGracePeriod)
        let daemons = Set(transceiver.connectedPeers + [first])
        guard daemons.count == 1 else {
            throw ListrCtlError.severalDaemons(serviceType: options.serviceType, names: daemons.map(\.name).sorted())
        }
        return first
    }

    /// The distinct names of `peers`, sorted.
    private static func names(of peers: [Peer]) -> [String] {
        Set(peers.map(\.name)).sorted()
    }

    /// Says bye to the daemon and stops.
    func disconnect() async {
        transceiver.stop()
    }

    /// Sends `command` and returns the daemon's message, or throws its error.
    func message(for command: some Encodable & Sendable) async throws(ListrCtlError) -> String {
        switch try await send(command) {
        case let .message(text): return text
        case .data: throw .unexpectedAnswer("data")
        case let .error(reason): throw .refused(reason)
        }
    }

    /// Sends `command` and returns the daemon's data, or throws its error.
    func data(for command: some Encodable & Sendable) async throws(ListrCtlError) -> Data {
        switch try await send(command) {
        case let .data(data): return data
        case .message: throw .unexpectedAnswer("a message")
        case let .error(reason): throw .refused(reason)
        }
    }

    /// The items, read through a dump.
    func items() async throws(ListrCtlError) -> [ListrKit.Item] {
        let dump = try await data(for: DumpDatabaseCommand())
        do {
            return try ItemPropertyList.decode(dump)
        } catch {
            throw .unexpectedAnswer("a dump that does not decode (\(error))")
        }
    }

    /// Prints a message (see ``Output``).
    func print(message: String) { output.print(message: message) }

    /// Prints items (see ``Output``).
    func print(items: [ListrKit.Item]) { output.print(items: items) }

    private func send(_ command: some Encodable & Sendable) async throws(ListrCtlError) -> CLIResponse {
        do {
            return try await transceiver.request(command, to: daemon, expecting: CLIResponse.self, timeout: options.timeoutDuration)
        } catch {
            throw ListrCtlError(error)
        }
    }
}
