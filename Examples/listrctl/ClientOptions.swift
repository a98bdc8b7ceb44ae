import ArgumentParser
import ListrKit
import Logging
import PeerKit

/// The options every `listrctl` command takes: which daemon to talk to, how long to wait, how to print.
struct ClientOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The DNS-SD service type listrd advertises.", valueName: "type"))
    var serviceType: String = "listrctl"

    @Option(help: ArgumentHelp("The name of the listrd to use (its --name), when several are running.", valueName: "name"))
    var peer: String?

    @Option(help: ArgumentHelp("Seconds to wait for a listrd, and then for its answer.", valueName: "seconds"))
    var timeout: Double = 5

    @Option(
        name: .customLong("connect"),
        help: ArgumentHelp("Dial listrd at this address instead of discovering it through avahi-daemon; repeatable.", valueName: "host:port")
    )
    var addresses: [String] = []

    @Option(help: ArgumentHelp("The pre-shared key file listrd uses. Default: $LISTR_KEY_FILE, else $XDG_CONFIG_HOME/listr/key, else ~/.config/listr/key.", valueName: "path"))
    var keyFile: String?

    @Flag(help: "Use no key (plaintext), to talk to a listrd started with --insecure.")
    var insecure = false

    @Flag(help: "Print machine-readable JSON: {\"message\":…} on standard output, {\"error\":…} on standard error.")
    var json = false

    @Flag(name: [.short, .long], help: "Log what PeerKit does to standard error, and which listrd were skipped and why.")
    var verbose = false

    func validate() throws {
        do {
            try ServiceType.validate(serviceType)
        } catch {
            throw ValidationError(error.description)
        }
        guard timeout > 0, timeout <= 3600 else {
            throw ValidationError("The timeout \(timeout) is not between 0 and 3600 seconds.")
        }
        for address in addresses where PeerEndpoint(address) == nil {
            throw ValidationError("The address \"\(address)\" is not HOST:PORT, for example 127.0.0.1:7000.")
        }
    }

    /// The timeout as a `Duration`.
    var timeoutDuration: Duration { .milliseconds(Int64((timeout * 1000).rounded())) }

    /// The security to connect with: the key file's key, or none with `--insecure`.
    func security() throws(ListrCtlError) -> PeerSecurity {
        if insecure { return .none }
        do {
            return .preSharedKey(try ListrKeyFile.resolve(option: keyFile).loadOrCreate().key)
        } catch {
            throw .keyFile(error.description)
        }
    }

    /// The addresses given with `--connect`.
    var endpoints: [PeerEndpoint] { addresses.compactMap(PeerEndpoint.init) }

    /// Where PeerKit logs: standard error with `--verbose`, nowhere otherwise (what matters is
    /// reported as the command's error).
    var peerKitLogger: Logger {
        guard verbose else { return Logger(label: "listrctl.peerkit", factory: { _ in SwiftLogNoOpLogHandler() }) }
        return Logger(label: "listrctl.peerkit") { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .debug
            return handler
        }
    }

    /// Connects to a daemon, runs `body`, disconnects. A failure is printed to standard error and
    /// ends the command with its exit status.
    func run(_ body: (ListrClient) async throws(ListrCtlError) -> Void) async throws {
        do throws(ListrCtlError) {
            let client = try await ListrClient.connect(self)
            let outcome: Result<Void, ListrCtlError>
            do throws(ListrCtlError) {
                try await body(client)
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            await client.disconnect()
            try outcome.get()
        } catch {
            throw fail(error)
        }
    }

    /// Prints `error` to standard error and returns the exit status to end the command with.
    func fail(_ error: ListrCtlError) -> ExitCode {
        Output(json: json).report(error)
        return ExitCode(error.exitCode)
    }
}
