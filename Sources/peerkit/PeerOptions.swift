import ArgumentParser
import Foundation
import Logging
import PeerKit
import ToolSupport

/// The options every `peerkit` subcommand takes: how the inspector joins the service type.
struct PeerOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The name other peers see (default: \"peerkit on HOST\"; for node, the host name).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("The address to listen on: :: (the default) for every interface over IPv6 and IPv4, 0.0.0.0 for IPv4 only, or one address.", valueName: "address"))
    var listenHost: String = "::"

    @Option(help: ArgumentHelp("The TCP port to listen on; 0 picks a free one.", valueName: "port"))
    var port: Int = 0

    @Option(
        name: .customLong("static"),
        help: ArgumentHelp("Dial HOST:PORT instead of discovering peers through avahi-daemon; repeatable.", valueName: "host:port")
    )
    var staticPeers: [String] = []

    @Flag(help: "Advertise the inspector through DNS-SD too, so that it shows in other peers' lists.")
    var advertise = false

    @Option(help: ArgumentHelp("Seconds to wait for a peer, and then for its answer.", valueName: "seconds"))
    var timeout: Double = 5

    @Option(help: ArgumentHelp("Talk TLS with the pre-shared key in this file (as `listrd --key-file` writes it); without it, plaintext.", valueName: "path"))
    var keyFile: String?

    @Option(help: ArgumentHelp("Talk TLS with a pre-shared key stretched from this passphrase (scrypt).", valueName: "passphrase"))
    var passphrase: String?

    @Option(help: ArgumentHelp("Talk mutual TLS 1.3 as the identity PATH.pem (certificate) and PATH.key (private key, mode 0600), as `peerkit identity create PATH` writes them; needs --trust or --trust-ca.", valueName: "path"))
    var identity: String?

    @Option(help: ArgumentHelp("With --identity: trust the peer whose public key has this SHA-256 fingerprint (as `peerkit identity create` prints it); repeatable.", valueName: "fingerprint"))
    var trust: [String] = []

    @Option(help: ArgumentHelp("With --identity: trust every peer whose certificate a CA in this PEM file signed; repeatable.", valueName: "path"))
    var trustCa: [String] = []

    @Flag(help: "Print one JSON object per line instead of text.")
    var json = false

    @Flag(help: "Log what PeerKit does to standard error (--log-level debug).")
    var verbose = false

    @Option(help: ArgumentHelp("Log what PeerKit does at this level and above to standard error: trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: Logger.Level?

    func validate() throws {
        if verbose, let logLevel, logLevel != .debug {
            throw ValidationError("--verbose means --log-level debug, and --log-level \(logLevel) was given too: give one of them.")
        }
        for entry in staticPeers where PeerEndpoint(entry) == nil {
            throw ValidationError("\"\(entry)\" is not HOST:PORT; write for example --static 127.0.0.1:7000.")
        }
        guard (0...65535).contains(port) else {
            throw ValidationError("The port \(port) is not between 0 and 65535.")
        }
        guard timeout > 0, timeout <= 3600 else {
            throw ValidationError("The timeout \(timeout) is not between 0 and 3600 seconds.")
        }
    }

    /// The timeout as a `Duration`.
    var timeoutDuration: Duration { .milliseconds(Int64((timeout * 1000).rounded())) }

    /// The configuration for `serviceType` as these options describe it.
    func configuration(serviceType: String) throws -> PeerConfiguration {
        do {
            try ServiceType.validate(serviceType)
        } catch {
            throw ValidationError(error.description)
        }
        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = name ?? "peerkit on \(PeerConfiguration.defaultPeerName)"
        configuration.listenHost = listenHost
        configuration.listenPort = port
        configuration.advertises = advertise
        if !staticPeers.isEmpty {
            configuration.discovery = .staticPeers(staticPeers.compactMap(PeerEndpoint.init))
        }
        do {
            if let keyFile, passphrase != nil {
                throw ValidationError("--key-file \(keyFile) and --passphrase both name a key; give one of them.")
            } else if let identity {
                guard keyFile == nil, passphrase == nil else {
                    throw ValidationError("--identity and a pre-shared key (--key-file, --passphrase) are two security modes; give one of them.")
                }
                guard !trust.isEmpty || !trustCa.isEmpty else {
                    throw ValidationError("--identity \(identity) needs the peers to trust: give --trust FINGERPRINT or --trust-ca PATH.")
                }
                let loaded = try PeerIdentity(certificateFile: identity + ".pem", keyFile: identity + ".key")
                let roots = try trustCa.flatMap { try PeerTrust.certificateAuthorities(file: $0).certificateAuthorities }
                configuration.security = .certificates(loaded, trust: try PeerTrust(pinnedFingerprints: trust, certificateAuthorities: roots))
            } else if !trust.isEmpty || !trustCa.isEmpty {
                throw ValidationError("--trust and --trust-ca need --identity PATH, this peer's own certificate and key.")
            } else if let keyFile {
                configuration.security = .preSharedKey(try PeerKey(contentsOfFile: keyFile))
            } else if let passphrase {
                configuration.security = .preSharedKey(try PeerKey(passphrase: passphrase))
            }
        } catch let error as PeerKitError {
            throw ValidationError(error.description)
        }
        var logger = Logger(label: "peerkit") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = logLevel ?? (verbose ? .debug : .critical)
        configuration.logger = logger
        return configuration
    }

    /// A transceiver for `serviceType` as these options describe it (not started).
    func transceiver(serviceType: String) throws -> PeerTransceiver {
        PeerTransceiver(configuration: try configuration(serviceType: serviceType))
    }

    /// Starts `transceiver` and returns its events from before it started, for ``peer(named:on:events:)``.
    func start(_ transceiver: PeerTransceiver) async throws -> AsyncStream<PeerEvent> {
        let events = transceiver.events()
        try await transceiver.start()
        return events
    }

    /// Waits for the peer named `name`, or for the first peer when `name` is nil.
    ///
    /// With `--static`, once every peer given was refused for security (another mode or key, an
    /// untrusted certificate; `events` from ``start(_:)`` tell), it throws that refusal at once
    /// rather than waiting out the timeout: nobody else will answer.
    func peer(named name: String?, on transceiver: PeerTransceiver, events: AsyncStream<PeerEvent>) async throws -> Peer {
        let timeout = timeoutDuration
        let staticCount = staticPeers.count
        return try await withThrowingTaskGroup(of: Peer?.self) { group in
            group.addTask {
                try await transceiver.waitForPeer(timeout: timeout) { peer in name.map { peer.name == $0 } ?? true }
            }
            group.addTask {
                var refusals = 0
                for await event in events {
                    guard staticCount > 0, case let .error(error) = event, error.isSecurityRefusal else { continue }
                    refusals += 1
                    if refusals >= staticCount { throw error }
                }
                return nil
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let peer = next { return peer }
            }
            throw PeerKitError.notRunning
        }
    }

    /// Prints `error` to standard error and returns the exit status for it.
    func fail(_ error: any Error) -> ExitCode {
        if let exitCode = error as? ExitCode { return exitCode }
        let status: ExitStatus
        let peerKitError = error as? PeerKitError
        switch peerKitError?.code {
        case _ where peerKitError?.isSecurityRefusal == true: status = .noPermission
        case .remoteError?: status = .refused
        case .listenFailed?, .invalidDiscoveryInfo?: status = .software
        default: status = .unavailable
        }
        let text = "\(error)"
        if json {
            Output.line(["error": text], to: .standardError)
        } else {
            FileHandle.standardError.write(Data("peerkit: \(Output.safe(text))\n".utf8))
        }
        return status.exitCode
    }
}

/// `--log-level notice`: a level by its name in swift-log (`Logger.Level`'s raw value).
extension Logger.Level: @retroactive ExpressibleByArgument {}
