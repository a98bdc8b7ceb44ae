import ArgumentParser
import Foundation
import ListrKit
import Logging
import PeerKit
import ServiceLifecycle
import ToolSupport
import UnixSignals

/// `listrd`: serves a to-do list to `listrctl` over PeerKit until SIGTERM or SIGINT.
@main
struct Listrd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listrd",
        abstract: "Serve a to-do list to listrctl over PeerKit.",
        discussion: """
        listrd advertises itself through avahi-daemon (DNS-SD) and answers the commands listrctl sends. \
        Every change is on disk before it is acknowledged. SIGTERM or SIGINT stops it gracefully. \
        Under systemd (Type=notify) it tells systemd when it is ready and when it stops.

        \(ExitStatus.help([.success, .usage, .software]))
        """,
        version: PeerKitVersion.current
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
            throw ExitStatus.software.exitCode
        }

        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = name
        configuration.listenHost = listenHost
        configuration.listenPort = port
        configuration.maximumFrameLength = ListrLimits.maximumMessageLength
        configuration.logger = Logger(label: "listrd.peerkit")

        let transceiver = PeerTransceiver(configuration: configuration)
        // Under systemd (Type=notify): READY=1 once listening, STOPPING=1 on the way out.
        let readiness = SystemdNotifier(logger: logger).follow(transceiver.events())
        defer { readiness?.cancel() }
        let service = ListrService(
            transceiver: transceiver,
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
            throw ExitStatus.software.exitCode
        } catch {
            logger.critical("listrd stopped: \(error)")
            throw ExitStatus.software.exitCode
        }
        // The transceiver stopped, so the event stream finished: wait until STOPPING=1 is sent
        // rather than exiting before it is.
        await readiness?.value
        withExtendedLifetime(lock) {}  // held until the transceiver stopped
        logger.info("stopped")
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
