import ArgumentParser
import Foundation
import ListrKit
import Logging
import PeerKit
import ServiceLifecycle

/// `listrd`: serves a to-do list to `listrctl` over PeerKit until SIGTERM or SIGINT.
@main
struct Listrd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listrd",
        abstract: "Serve a to-do list to listrctl over PeerKit.",
        discussion: """
        listrd advertises itself through avahi-daemon (DNS-SD) and answers the commands listrctl sends. \
        Every change is on disk before it is acknowledged. SIGTERM or SIGINT stops it gracefully.
        """
    )

    @Option(help: ArgumentHelp("The store file.", valueName: "path"))
    var store: String = StoreFile.defaultPath()

    @Option(help: ArgumentHelp("The name listrctl sees and selects with --peer.", valueName: "name"))
    var name: String = "Listr on \(PeerConfiguration.defaultPeerName)"

    @Option(help: ArgumentHelp("The DNS-SD service type to advertise.", valueName: "type"))
    var serviceType: String = "listrctl"

    @Option(help: ArgumentHelp("The address to listen on.", valueName: "address"))
    var listenHost: String = "0.0.0.0"

    @Option(help: ArgumentHelp("The TCP port to listen on; 0 picks a free one.", valueName: "port"))
    var port: Int = 0

    @Option(help: ArgumentHelp("The pre-shared key file (made on first run). Default: $LISTR_KEY_FILE, else $XDG_CONFIG_HOME/listr/key, else ~/.config/listr/key.", valueName: "path"))
    var keyFile: String?

    @Flag(help: "Use no key: plaintext, so anyone on the network can read, replace or delete the list.")
    var insecure = false

    @Option(help: ArgumentHelp("The lowest level logged: trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: Logger.Level = .info

    func validate() throws {
        do {
            try ServiceType.validate(serviceType)
        } catch {
            throw ValidationError(error.description)
        }
        guard (0...65535).contains(port) else {
            throw ValidationError("The port \(port) is not between 0 and 65535.")
        }
        guard !name.isEmpty, name.utf8.count <= 63 else {
            throw ValidationError("The name \"\(name)\" cannot be advertised: use 1 to 63 bytes.")
        }
    }

    func run() async throws {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "listrd")

        let storeFile = StoreFile(path: (store as NSString).standardizingPath)
        let lock: StoreLock
        let itemStore: ItemStore
        do {
            try storeFile.createDirectory()
            lock = try StoreLock(storePath: storeFile.path)
            itemStore = try ItemStore(persistence: storeFile)
        } catch {
            logger.critical("\(error.description)")
            throw ExitCode.failure
        }

        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = name
        configuration.listenHost = listenHost
        configuration.listenPort = port
        configuration.maximumFrameLength = ListrLimits.maximumMessageLength
        configuration.logger = Logger(label: "listrd.peerkit")
        if insecure {
            logger.warning("--insecure: listrd uses no key; anyone on the network can read, replace or delete the list.")
        } else {
            let keyFile = ListrKeyFile.resolve(option: keyFile)
            do {
                let (key, created) = try keyFile.loadOrCreate()
                configuration.security = .preSharedKey(key)
                logger.info("\(created ? "Created a new key" : "Using the key") in \(keyFile.path) (key id \(key.keyID)); listrctl reads the same file.")
            } catch {
                logger.critical("\(error.description)")
                throw ExitCode(78)
            }
        }

        let service = ListrService(
            transceiver: PeerTransceiver(configuration: configuration),
            handler: ListrRequestHandler(store: itemStore),
            storePath: storeFile.path,
            logger: logger
        )
        let group = ServiceGroup(
            services: [service],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        do {
            try await group.run()
        } catch let PeerKitError.listenFailed(address, reason) {
            logger.critical("listrd cannot listen on \(address): \(reason). Choose another --port or --listen-host.")
            throw ExitCode.failure
        } catch {
            logger.critical("listrd stopped: \(error)")
            throw ExitCode.failure
        }
        withExtendedLifetime(lock) {}  // held until the transceiver stopped
        logger.info("stopped")
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
