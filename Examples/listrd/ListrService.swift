import Foundation
import ListrKit
import Logging
import PeerKit
import ServiceLifecycle
import Synchronization

/// The daemon as a `Service`: answers the Listr commands on a transceiver until graceful
/// shutdown, pushes every change to the watchers, and applies settings as they change.
///
/// Each command is answered to its sender only (`respond(to:)`). PeerKit runs one transceiver's
/// handlers one at a time, and the ``ItemStore`` actor applies changes one at a time as well,
/// so no update is lost however many clients send at once. Changes reach watchers from a task
/// per watcher (``ListrWatchers``), never from a handler, so a slow watcher holds up nobody.
///
/// A new `name` cannot be advertised by a running transceiver, so a name change restarts the
/// transceiver (not the process) on the same port, ``renameGrace`` after the change, which lets
/// the answer to `config set name` leave first. Connected clients are disconnected; `listrctl
/// watch` reconnects by itself.
final class ListrService: Service, Sendable {
    /// How long after a name change the transceiver restarts under the new name.
    static let renameGrace: Duration = .milliseconds(300)

    private let configuration: PeerConfiguration
    private let store: ItemStore
    private let handler: ListrRequestHandler
    private let watchers: ListrWatchers
    private let names: AsyncStream<String>
    private let storePath: String
    private let commandLine: (name: String?, logLevel: Logger.Level?)
    private let liveLevel: LiveLogLevel
    /// Tells systemd (Type=notify) when listrd is ready and when it stops.
    private let notifier: SystemdNotifier
    private let logger: Logger

    /// A service for the store in `database`; `name` and `logLevel` are what the command line
    /// set (they override the stored settings and are saved).
    init(
        configuration: PeerConfiguration, database: ListrDatabase, storePath: String,
        name: String?, logLevel: Logger.Level?, liveLevel: LiveLogLevel,
        notifier: SystemdNotifier, logger: Logger
    ) throws(ListrError) {
        let box = TransceiverBox()
        let watchers = ListrWatchers { message, peer in
            guard let transceiver = box.transceiver else { throw PeerKitError.notRunning }
            switch message {
            case let .change(change): try await transceiver.send(change, to: [peer])
            case let .ended(ended): try await transceiver.send(ended, to: [peer])
            }
        }
        let (names, namesContinuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))
        let store = try ItemStore(persistence: database) { change in
            watchers.publish(change)
            if let settings = change.settings {
                liveLevel.current = Logger.Level(settings.logLevel)
                namesContinuation.yield(settings.name)
            }
        }
        self.configuration = configuration
        self.store = store
        self.handler = ListrRequestHandler(store: store, watchers: watchers)
        self.watchers = watchers
        self.box = box
        self.names = names
        self.storePath = storePath
        self.commandLine = (name, logLevel)
        self.liveLevel = liveLevel
        self.notifier = notifier
        self.logger = logger
    }

    private let box: TransceiverBox

    /// The transceiver serving now, for the watchers' `send`.
    private final class TransceiverBox: Sendable {
        private let value = Mutex<PeerTransceiver?>(nil)
        var transceiver: PeerTransceiver? {
            get { value.withLock { $0 } }
            set { value.withLock { $0 = newValue } }
        }
    }

    func run() async throws {
        let settings = try await applyCommandLine()
        liveLevel.current = Logger.Level(settings.logLevel)
        var name = settings.name
        var port = configuration.listenPort
        while true {
            var configuration = configuration
            configuration.peerName = name
            configuration.listenPort = port
            let transceiver = PeerTransceiver(configuration: configuration)
            register(on: transceiver)
            box.transceiver = transceiver
            try await transceiver.start()
            port = transceiver.listeningPort ?? port
            logger.notice("""
                serving "\(name)" (service type \(configuration.serviceType)) \
                on port \(port), store \(storePath)
                """)
            await notifier.send("READY=1\nSTATUS=Serving on port \(port) as \"\(name)\".")

            let renamed = await nextName(after: name)
            watchers.removeAll()
            if let renamed {
                try? await Task.sleep(for: Self.renameGrace)
                logger.info("renaming: restarting the transceiver as \"\(renamed)\" on port \(port)")
                await transceiver.shutdown()
                name = renamed
                continue
            }
            logger.info("stopping: withdrawing the advertisement and saying bye to every peer")
            await notifier.send("STOPPING=1\nSTATUS=Saying bye to every peer.")
            await transceiver.shutdown()
            box.transceiver = nil
            return
        }
    }

    /// Saves the settings the command line gave; returns the settings in effect.
    private func applyCommandLine() async throws -> ListrSettings {
        let (name, level) = commandLine
        return try await store.updateSettings(by: "listrd's command line") { settings in
            if let name { settings.name = name }
            if let level { settings.logLevel = ListrSettings.LogLevel(level) }
        }
    }

    /// Waits for a new name (returned) or graceful shutdown (nil).
    private func nextName(after current: String) async -> String? {
        let names = names
        return await withTaskGroup(of: String?.self) { group in
            group.addTask {
                for await name in names where name != current { return name }
                return nil
            }
            group.addTask {
                // Serve until SIGTERM/SIGINT; a CancellationError (the group was cancelled) ends it too.
                try? await gracefulShutdown()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    private func register(on transceiver: PeerTransceiver) {
        handler.serve(on: transceiver, logger: logger)
    }
}

extension Logger.Level {
    /// The swift-log level of a Listr setting (they are spelled alike).
    init(_ level: ListrSettings.LogLevel) {
        self = Logger.Level(rawValue: level.rawValue) ?? .info
    }
}

extension ListrSettings.LogLevel {
    /// The Listr setting of a swift-log level (they are spelled alike).
    init(_ level: Logger.Level) {
        self = ListrSettings.LogLevel(rawValue: level.rawValue) ?? .info
    }
}
