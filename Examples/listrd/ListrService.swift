import ListrKit
import Logging
import PeerKit
import ServiceLifecycle

/// The daemon as a `Service`: answers the Listr commands on a transceiver until graceful shutdown.
///
/// Each command is answered to its sender only (`respond(to:)`). PeerKit runs one transceiver's
/// handlers one at a time, and the ``ItemStore`` actor applies changes one at a time as well,
/// so no update is lost however many clients send at once.
struct ListrService: Service {
    let transceiver: PeerTransceiver
    let handler: ListrRequestHandler
    let storePath: String
    let logger: Logger

    func run() async throws {
        serve(AddItemCommand.self) { await $0.handle($1) }
        serve(ListItemsCommand.self) { await $0.handle($1) }
        serve(CompleteItemCommand.self) { await $0.handle($1) }
        serve(RemoveItemCommand.self) { await $0.handle($1) }
        serve(DumpDatabaseCommand.self) { await $0.handle($1) }
        serve(ReplaceDatabaseCommand.self) { await $0.handle($1) }

        try await transceiver.start()
        let configuration = transceiver.configuration
        logger.notice("""
            serving "\(configuration.peerName)" (service type \(configuration.serviceType)) \
            on port \(transceiver.listeningPort ?? configuration.listenPort), store \(storePath)
            """)

        // Serve until SIGTERM/SIGINT; a CancellationError (the group was cancelled) ends it too.
        try? await gracefulShutdown()
        logger.info("stopping: withdrawing the advertisement and saying bye to every peer")
        await transceiver.shutdown()
    }

    /// Registers `handle` as the responder for `Command`, logging each command and its outcome.
    private func serve<Command: Decodable & Sendable>(
        _ type: Command.Type,
        _ handle: @escaping @Sendable (ListrRequestHandler, Command) async -> CLIResponse
    ) {
        let handler = handler
        let logger = logger
        transceiver.respond(to: type) { command, sender in
            let response = await handle(handler, command)
            if case let .error(reason) = response {
                logger.notice("\(Command.self) from \(sender) refused: \(reason)")
            } else {
                logger.info("\(Command.self) from \(sender) done")
            }
            return response
        }
    }
}
