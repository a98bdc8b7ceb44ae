import Logging
import PeerKit

extension ListrRequestHandler {
    /// Answers every Listr command on `transceiver` (each with `respond(to:)`, to its sender
    /// only), logging each command and its outcome, and forgets a watcher whose peer disconnects.
    /// Refusals are logged at notice once per series from a peer (see ``refusals``); whoever
    /// serves logs ``RefusalLog/due()`` every second or so, for the counts.
    ///
    /// This is how `listrd` serves; tests call it on a transceiver of a `PeerKitTesting`
    /// `TestNetwork` to drive the same command handling over the wire without processes.
    public func serve(on transceiver: PeerTransceiver, logger: Logger) {
        serve(AddItemCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(ListItemsCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(CompleteItemCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(RemoveItemCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(DumpDatabaseCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(ReplaceDatabaseCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(WatchCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(GetSettingsCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(SetSettingCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        serve(ResetSettingsCommand.self, on: transceiver, logger: logger) { await $0.handle($1, from: $2) }
        let watchers = watchers
        transceiver.peerDisconnected = { peer in
            if watchers.contains(peer) {
                watchers.remove(peer)
                logger.info("\(peer) stopped watching")
            }
        }
    }

    /// Registers `handle` as the responder for `Command` (replacing an earlier one), logging each
    /// command and its outcome (a refusal at notice only when it starts a series, see ``refusals``).
    public func serve<Command: Decodable & Sendable>(
        _ type: Command.Type,
        on transceiver: PeerTransceiver,
        logger: Logger,
        _ handle: @escaping @Sendable (ListrRequestHandler, Command, Peer) async -> CLIResponse
    ) {
        let handler = self
        transceiver.respond(to: type) { [weak transceiver] command, sender in
            logger.debug("\(Command.self) from \(sender) received")
            let response = await handle(handler, command, sender)
            if case let .error(reason) = response {
                // The first refusal of a series at notice, the rest counted (RefusalLog). A series
                // is kept per source address: a peer ID is whatever a peer says, and an attacker
                // with the key could otherwise start a new series, and a new line, per made-up ID.
                let address = transceiver?.sourceAddress(of: sender)
                let lines = handler.refusals.refused(key: address ?? sender.id, name: address.map { "\(sender) or another peer at \($0)" } ?? "\(sender)")
                if let summary = lines.summary { logger.notice("\(summary)") }
                if lines.logRefusal {
                    logger.notice("\(Command.self) from \(sender) refused: \(reason)")
                } else {
                    logger.debug("\(Command.self) from \(sender) refused: \(reason)")
                }
            } else {
                logger.info("\(Command.self) from \(sender) done")
            }
            return response
        }
    }
}
