import ArgumentParser
import Foundation
import ListrKit
import Logging
import PeerKit
import Prometheus
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

        \(ExitStatus.help([.success, .usage, .software, .configuration]))
        """,
        version: PeerKitVersion.current
    )

    @Option(help: ArgumentHelp("The store: an SQLite database (a JSON store of an earlier listrd is migrated).", valueName: "path"))
    var store: String = StoreFile.defaultPath()

    @Option(help: ArgumentHelp("The name listrctl sees and selects with --peer (saved in the store's settings; default: the saved one, else \"Listr on <host name>\").", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("The DNS-SD service type to advertise.", valueName: "type"))
    var serviceType: String = "listrctl"

    @Option(help: ArgumentHelp("The address to listen on: :: (the default) for every interface over IPv6 and IPv4, 0.0.0.0 for IPv4 only, or one address.", valueName: "address"))
    var listenHost: String = "::"

    @Option(help: ArgumentHelp("The TCP port to listen on; 0 picks a free one.", valueName: "port"))
    var port: Int = 0

    @Option(help: ArgumentHelp("The pre-shared key file (made on first run). Default: $LISTR_KEY_FILE, else $XDG_CONFIG_HOME/listr/key, else ~/.config/listr/key.", valueName: "path"))
    var keyFile: String?

    @Flag(help: "Use no key: plaintext, so anyone on the network can read, replace or delete the list.")
    var insecure = false

    @Option(help: ArgumentHelp("Serve PeerKit's metrics as Prometheus text on this TCP port (GET /metrics); 0 picks a free one. Default: off.", valueName: "port"))
    var metricsPort: Int?

    @Option(help: ArgumentHelp("The address the metrics are served on (with --metrics-port).", valueName: "address"))
    var metricsHost: String = "127.0.0.1"

    @Option(help: ArgumentHelp("What listrd may hold queued to send to all peers together, in MiB, before it stops answering those whose replies wait unread (PeerConfiguration.maximumTotalQueuedOutboundBytes; default 128).", valueName: "MiB"))
    var outboundBudget: Int?

    @Option(help: ArgumentHelp("How long a peer may leave its replies unread, over its own limit or holding the spent budget, before it is disconnected as too slow (PeerConfiguration.slowPeerGracePeriod; default 10).", valueName: "seconds"))
    var slowPeerGrace: Double?

    @Option(help: ArgumentHelp("How long a peer's refused requests must pause before the series ends and its count is logged; only a series' first refusal is logged one by one (default 10).", valueName: "seconds"))
    var refusalQuietPeriod: Double?

    @Option(help: ArgumentHelp("The lowest level logged: trace, debug, info, notice, warning, error or critical (saved in the store's settings; default: the saved one, else info).", valueName: "level"))
    var logLevel: Logger.Level?

    func validate() throws {
        do {
            try ServiceType.validate(serviceType)
        } catch {
            throw ValidationError(error.description)
        }
        guard (0...65535).contains(port) else {
            throw ValidationError("The port \(port) is not between 0 and 65535.")
        }
        if let metricsPort, !(0...65535).contains(metricsPort) {
            throw ValidationError("The metrics port \(metricsPort) is not between 0 and 65535.")
        }
        if let outboundBudget, !(1...65536).contains(outboundBudget) {
            throw ValidationError("The outbound budget of \(outboundBudget) MiB is not between 1 and 65536 MiB.")
        }
        if let slowPeerGrace, !(0.1...3600).contains(slowPeerGrace) {
            throw ValidationError("The slow-peer grace period of \(slowPeerGrace) s is not between 0.1 and 3600 seconds.")
        }
        if let refusalQuietPeriod, !(0.1...3600).contains(refusalQuietPeriod) {
            throw ValidationError("The refusal quiet period of \(refusalQuietPeriod) s is not between 0.1 and 3600 seconds.")
        }
        if let name {
            var settings = ListrSettings.defaults
            do {
                try settings.set(ListrSettings.Key.name.rawValue, to: name)
            } catch {
                throw ValidationError("The name \"\(name)\" cannot be advertised: use 1 to 63 bytes of one line.")
            }
        }
    }

    func run() async throws {
        let liveLevel = LiveLogLevel(logLevel ?? .info)
        LoggingSystem.bootstrap { label in liveLevel.handler(label: label) }
        let logger = Logger(label: "listrd")

        // The key first: a key file that cannot be used stops listrd before the store (or its
        // folder) is created.
        var security: PeerSecurity = .none
        if insecure {
            logger.warning("--insecure: listrd uses no key; anyone on the network can read, replace or delete the list.")
        } else {
            let keyFile = ListrKeyFile.resolve(option: keyFile)
            do {
                let (key, created) = try keyFile.loadOrCreate()
                security = .preSharedKey(key)
                logger.info("\(created ? "Created a new key" : "Using the key") in \(keyFile.path) (key id \(key.keyID)); listrctl reads the same file.")
            } catch {
                logger.critical("\(error.description)")
                throw ExitStatus.configuration.exitCode
            }
        }

        let storeFile = StoreFile(path: (store as NSString).standardizingPath)
        let lock: StoreLock
        let opened: StoreFile.Opened
        do {
            try storeFile.createDirectory()
            lock = try StoreLock(storePath: storeFile.path)
            opened = try storeFile.open()
        } catch {
            logger.critical("\(error.description)")
            throw ExitStatus.software.exitCode
        }
        opened.log(to: logger)

        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.listenHost = listenHost
        configuration.listenPort = port
        configuration.maximumFrameLength = ListrLimits.maximumMessageLength
        configuration.maximumIncomingResourceBytes = ListrLimits.maximumStoreBytes
        if let outboundBudget { configuration.maximumTotalQueuedOutboundBytes = outboundBudget * 1024 * 1024 }
        if let slowPeerGrace { configuration.slowPeerGracePeriod = .seconds(slowPeerGrace) }
        configuration.logger = Logger(label: "listrd.peerkit")
        configuration.security = security
        var services: [any Service] = []
        if let metricsPort {
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            // Requests on a LAN take well under 5 ms, the factory's smallest default bucket.
            factory.durationHistogramBuckets["peerkit_request_duration_seconds"] = [
                .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2500),
                .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
            ]
            configuration.metricsFactory = factory
            services.append(MetricsServer(host: metricsHost, port: metricsPort, registry: registry, logger: logger))
        }

        let service: ListrService
        do {
            service = try ListrService(
                configuration: configuration, database: opened.database, storePath: storeFile.path,
                name: name, logLevel: logLevel, liveLevel: liveLevel,
                refusals: RefusalLog(quietPeriod: refusalQuietPeriod.map { .seconds($0) } ?? RefusalEpisodes.defaultQuietPeriod),
                notifier: SystemdNotifier(logger: logger), logger: logger
            )
        } catch {
            logger.critical("\(error.description)")
            throw ExitStatus.software.exitCode
        }
        let group = ServiceGroup(
            services: [service] + services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        do {
            try await group.run()
        } catch let error as PeerKitError where error.code == .listenFailed {
            logger.critical("listrd cannot listen on \(error.address ?? "\(listenHost):\(port)"): \(error.reason ?? "\(error)"). Choose another --port or --listen-host.")
            throw ExitStatus.software.exitCode
        } catch {
            logger.critical("listrd stopped: \(error)")
            throw ExitStatus.software.exitCode
        }
        withExtendedLifetime(lock) {}  // held until the transceiver stopped
        logger.info("stopped")
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
