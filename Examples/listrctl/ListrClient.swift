import Foundation
import ListrKit
import PeerKit

/// One daemon, found and connected: sends it commands and turns its answers into values.
struct ListrClient {
    /// The options the command was given.
    let options: ClientOptions
    /// How to print.
    let output: Output
    /// The transceiver the commands go through (`listrctl watch` also receives on it).
    let transceiver: PeerTransceiver
    /// The daemon in use.
    let daemon: Peer

    /// How long to wait before dialling again a daemon that closed the connection during the
    /// handshake (its pending handshakes were at their limit, or it was restarting).
    static let handshakeRetryDelay: Duration = .milliseconds(200)

    /// Starts a transceiver that only dials, and waits for the daemon to use: the one named by
    /// `--peer`, or the only one there is.
    ///
    /// A daemon that closes the connection during the TLS handshake has not compared keys (a
    /// daemon with another key says so with a TLS alert): it is busy or restarting, so listrctl
    /// tries again every ``handshakeRetryDelay`` until `--timeout` has passed, and only then says
    /// so (``ListrCtlError/handshakeInterrupted(_:)``, exit status 69).
    static func connect(_ options: ClientOptions) async throws(ListrCtlError) -> ListrClient {
        let deadline = ContinuousClock.now + options.timeoutDuration
        var options = options
        while true {
            do {
                return try await connectOnce(options)
            } catch {
                guard case .handshakeInterrupted = error else { throw error }
                let left = deadline - ContinuousClock.now - handshakeRetryDelay
                guard left > .milliseconds(100) else { throw error }
                try? await Task.sleep(for: handshakeRetryDelay)
                options.timeout = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            }
        }
    }

    private static func connectOnce(_ options: ClientOptions) async throws(ListrCtlError) -> ListrClient {
        var configuration = PeerConfiguration(serviceType: options.serviceType)
        configuration.advertises = false
        configuration.peerName = clientName
        configuration.maximumFrameLength = ListrLimits.maximumMessageLength
        configuration.maximumIncomingResourceBytes = ListrLimits.maximumStoreBytes
        configuration.logger = options.peerKitLogger
        configuration.security = try options.security()
        if !options.endpoints.isEmpty {
            configuration.discovery = .staticPeers(options.endpoints)
        }
        let transceiver = PeerTransceiver(configuration: configuration)
        // Subscribed before start, so that no refusal of a daemon is missed.
        let events = transceiver.events()
        do {
            try await transceiver.start()
            let daemon = try await findDaemon(on: transceiver, options: options, events: events)
            return ListrClient(options: options, output: Output(json: options.json), transceiver: transceiver, daemon: daemon)
        } catch {
            await transceiver.shutdown()
            throw ListrCtlError(error)
        }
    }

    /// The name listrd sees, and tells watchers made a change: `listrctl <pid> on <host>`,
    /// at most 63 bytes.
    static var clientName: String {
        String(decoding: "listrctl \(getpid()) on \(PeerConfiguration.defaultPeerName)".utf8.prefix(63), as: UTF8.self)
    }

    /// Says bye to the daemon and returns once the connection is closed.
    func disconnect() async {
        await transceiver.shutdown()
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

    /// Prints a message (see ``Output``).
    func print(message: String) { output.print(message: message) }

    /// Prints items numbered from `offset + 1` (see ``Output``).
    func print(items: [ListrKit.Item], from offset: Int = 0) { output.print(items: items, from: offset) }

    /// Sends `command` and returns the daemon's answer as it is.
    func response(for command: some Encodable & Sendable) async throws(ListrCtlError) -> CLIResponse {
        try await send(command)
    }

    private func send(_ command: some Encodable & Sendable) async throws(ListrCtlError) -> CLIResponse {
        do {
            return try await transceiver.request(command, to: daemon, expecting: CLIResponse.self, timeout: options.timeoutDuration)
        } catch {
            throw ListrCtlError(error)
        }
    }
}
