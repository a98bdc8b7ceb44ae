import ArgumentParser
import Foundation
import Logging

/// Options every benchmark process takes.
struct CommonOptions: ParsableArguments {
    /// The service type; transceivers only talk to peers of the same type.
    @Option(help: "The DNS-SD service type (1–15 lowercase letters, digits, '-').")
    var serviceType = "peerkit-bench"

    /// The process gives up after this long, so that nothing outlives a run.
    @Option(help: "Seconds after which the process exits with an error, whatever it is doing.")
    var timeout: Double = 60

    /// The lowest level PeerKit logs at, on stderr.
    @Option(help: "The lowest level PeerKit logs on stderr: trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .warning

    /// Starts the watchdog that ends the process after ``timeout`` seconds; `progress` says how
    /// far the process got, for the error message.
    func startWatchdog(_ what: String, progress: @escaping @Sendable () -> String = { "" }) {
        let seconds = timeout
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: seconds)
            let got = progress()
            Report.fail("\(what) did not finish within \(seconds) s\(got.isEmpty ? "" : " (\(got))"); giving up. Raise --timeout if the machine is slow.")
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
