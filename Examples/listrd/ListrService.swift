import Foundation
import ListrKit
import Logging
import NIOCore
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
///
/// While anyone watches, a child task of ``run()`` looks every ``changesElsewhereInterval`` for
/// commits another program (the `sqlite3` shell) made to the store, so that watchers hear of
/// them without waiting for a request.
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
    /// set (they override the stored settings and are saved); `refusals` says which refused
    /// requests to log.
    init(
        configuration: PeerConfiguration, database: ListrDatabase, storePath: String,
        name: String?, logLevel: Logger.Level?, liveLevel: LiveLogLevel, refusals: RefusalLog,
        notifier: SystemdNotifier, logger: Logger
    ) throws(ListrError) {
        let box = TransceiverBox()
        let watchers = ListrWatchers { message, peer in
            guard let transceiver = box.transceiver else { throw PeerKitError.notRunning }
            switch message {
            case let .change(change): try await transceiver.send(change, to: [peer])
            case let .ended(ended): try await transceiver.send(ended, to: [peer])
            }
        } dropped: { peer, error in
            // At most one line per watch (64 watchers at most, each needing a connection, and a
            // watch is dropped for falling behind only after 256 KiB of changes).
            if let error = error as? ListrError, case .watcherFellBehind = error {
                logger.notice("Stopped pushing changes to \(peer): \(error)")
            } else {
                logger.debug("Stopped pushing changes to \(peer): sending to it failed: \(error)")
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
        self.handler = ListrRequestHandler(store: store, watchers: watchers, refusals: refusals)
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
    /// Replacement lists uploaded as resources (``ListrResources/replace``), by the uploader's
    /// peer ID, until its `ReplaceDatabaseCommand` (or its disconnect).
    private let uploads = Uploads()

    /// The uploaded lists, shared with the handlers. An upload holds one of the
    /// ``ListrLimits/maximumPendingUploads`` slots from its first byte until its command takes it
    /// (or it fails, or its peer disconnects), so that the limit bounds memory at every moment,
    /// not only when an upload starts.
    private final class Uploads: Sendable {
        private struct State {
            var lists: [String: Data] = [:]
            var receiving = 0
        }
        private let state = Mutex(State())

        /// Takes a slot for an upload from `peerID`; false when every slot is taken by uploads
        /// being received or waiting for their command. A list `peerID` uploaded before is
        /// dropped: the new one replaces it.
        func reserve(for peerID: String) -> Bool {
            state.withLock { state in
                state.lists[peerID] = nil
                guard state.lists.count + state.receiving < ListrLimits.maximumPendingUploads else { return false }
                state.receiving += 1
                return true
            }
        }

        /// The upload whose slot `reserve` took ended: with its list, kept for `peerID`'s
        /// command; or with nil (it failed), freeing the slot.
        func finish(_ data: Data?, for peerID: String) {
            state.withLock { state in
                state.receiving -= 1
                if let data { state.lists[peerID] = data }
            }
        }

        /// Takes the list `peerID` uploaded.
        func take(for peerID: String) -> Data? {
            state.withLock { $0.lists.removeValue(forKey: peerID) }
        }
    }

    /// How many dumps are being sent (at most ``ListrLimits/maximumConcurrentDumps``, and one
    /// fewer to one address).
    private let dumps = DumpCount()

    /// The dumps being sent, in all and by the address they go to, shared with the handlers.
    /// A peer ID is whatever a client claims, so the share of one client is counted by its
    /// address (``PeerTransceiver/sourceAddress(of:)``): one host never holds every slot, however
    /// many connections and peer IDs it uses.
    private final class DumpCount: Sendable {
        private struct Counts {
            var total = 0
            var byAddress: [String: Int] = [:]
        }

        private let counts = Mutex(Counts())

        /// Why a dump cannot start now, as a sentence; nil when it was counted.
        func take(for address: String?) -> String? {
            counts.withLock { counts in
                guard counts.total < ListrLimits.maximumConcurrentDumps else {
                    return "listrd is already sending \(ListrLimits.maximumConcurrentDumps) dumps, its limit; try again once one has arrived."
                }
                if let address {
                    let held = counts.byAddress[address, default: 0]
                    guard held < ListrLimits.maximumConcurrentDumpsPerAddress else {
                        return "listrd is already sending \(held) dumps to \(address), its limit for one address (ListrLimits.maximumConcurrentDumpsPerAddress); try again once one has arrived."
                    }
                    counts.byAddress[address] = held + 1
                }
                counts.total += 1
                return nil
            }
        }

        /// A dump to `address` ended (sent, failed, or never started).
        func release(for address: String?) {
            counts.withLock { counts in
                counts.total -= 1
                guard let address, let held = counts.byAddress[address] else { return }
                counts.byAddress[address] = held > 1 ? held - 1 : nil
            }
        }
    }

    /// The transceiver serving now, for the watchers' `send`.
    private final class TransceiverBox: Sendable {
        private let value = Mutex<PeerTransceiver?>(nil)
        var transceiver: PeerTransceiver? {
            get { value.withLock { $0 } }
            set { value.withLock { $0 = newValue } }
        }
    }

    /// How often listrd looks for commits another program made to the store while anyone
    /// watches (see ``ItemStore/followChangesElsewhere()``): each look is one `PRAGMA
    /// data_version`.
    static let changesElsewhereInterval: Duration = .seconds(1)

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.followChangesElsewhere() }
            group.addTask { await self.logRefusalCounts() }
            defer { group.cancelAll() }
            try await serve()
        }
    }

    /// Logs, every second, the counts of refusals not logged one by one (see ``RefusalLog``): a
    /// series from one peer is summarised when it ends and every minute while it goes on.
    private func logRefusalCounts() async {
        while (try? await Task.sleep(for: .seconds(1))) != nil {
            for line in handler.refusals.due() { logger.notice("\(line)") }
        }
    }

    /// While anyone watches, looks every ``changesElsewhereInterval`` for commits another
    /// program made to the store, so that watchers hear of them without waiting for a request;
    /// ends when cancelled.
    private func followChangesElsewhere() async {
        var failing = false
        while (try? await Task.sleep(for: Self.changesElsewhereInterval)) != nil {
            guard watchers.count > 0 else { continue }
            do {
                try await store.followChangesElsewhere()
                if failing { logger.notice("The store can be read again.") }
                failing = false
            } catch {
                // Once until it recovers: the next request reports the error to its client anyway.
                if !failing { logger.warning("Looking for changes another program made to the store failed: \(error)") }
                failing = true
            }
        }
    }

    /// Serves on a transceiver until graceful shutdown, and restarts it under the new name after
    /// a name change.
    private func serve() async throws {
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
        // Every command as ListrKit serves it (the tests drive the same over a TestNetwork);
        // then the store's dump and replace again, to travel as resources when the client can.
        handler.serve(on: transceiver, logger: logger)
        let box = box
        let uploads = uploads
        let dumps = dumps
        handler.serve(DumpDatabaseCommand.self, on: transceiver, logger: logger) { handler, command, sender in
            guard command.asResource == true else { return await handler.handle(command, from: sender) }
            return await Self.sendDump(handler: handler, to: sender, on: box.transceiver, counting: dumps)
        }
        handler.serve(ReplaceDatabaseCommand.self, on: transceiver, logger: logger) { handler, command, sender in
            guard command.upload == true else { return await handler.handle(command, from: sender) }
            guard let data = uploads.take(for: sender.id) else {
                return .error("No list was uploaded by this client: send it as the resource \"\(ListrResources.replace)\" first; nothing was changed.")
            }
            return await handler.handle(ReplaceDatabaseCommand(data: data), from: sender)
        }
        transceiver.receiveResources(named: ListrResources.replace) { resource in
            try await Self.receiveUpload(resource, into: uploads)
        }
        let watchers = watchers
        let logger = logger
        transceiver.peerDisconnected = { peer in
            _ = uploads.take(for: peer.id)
            if watchers.contains(peer) {
                watchers.remove(peer)
                logger.info("\(peer) stopped watching")
            }
        }
    }

    /// Starts sending the list to `sender` as the resource ``ListrResources/dump`` and answers at
    /// once, so other commands are served while the bytes travel. At most
    /// ``ListrLimits/maximumConcurrentDumps`` are sent at once (`dumps` counts them).
    private static func sendDump(handler: ListrRequestHandler, to sender: Peer, on transceiver: PeerTransceiver?, counting dumps: DumpCount) async -> CLIResponse {
        guard let transceiver else { return .error(PeerKitError.notRunning.description) }
        let address = transceiver.sourceAddress(of: sender)
        if let refusal = dumps.take(for: address) { return .error(refusal) }
        do {
            let dump = try await handler.dump()
            let transfer = try await transceiver.send(resource: dump.source, named: ListrResources.dump, to: sender)
            let logger = transceiver.configuration.logger
            Task {
                defer { dumps.release(for: address) }
                do {
                    try await transfer.finished()
                } catch {
                    logger.notice("The dump to \(sender) did not complete: \(error)")
                }
            }
            return .message("Sending the list (\(dump.size) bytes) as the resource \"\(ListrResources.dump)\".")
        } catch {
            dumps.release(for: address)
            return .error("\(error)")
        }
    }

    /// Reads an uploaded replacement list into memory (announced sizes over the limit are
    /// refused by PeerKit before they travel) and keeps it for the uploader's command.
    private static func receiveUpload(_ resource: IncomingResource, into uploads: Uploads) async throws {
        guard uploads.reserve(for: resource.sender.id) else {
            throw ListrError.tooManyUploads(limit: ListrLimits.maximumPendingUploads)
        }
        var data = Data()
        do {
            if let size = resource.size { data.reserveCapacity(Int(size)) }
            for try await chunk in resource.chunks {
                data.append(contentsOf: chunk.readableBytesView)
            }
        } catch {
            uploads.finish(nil, for: resource.sender.id)
            throw error
        }
        uploads.finish(data, for: resource.sender.id)
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
