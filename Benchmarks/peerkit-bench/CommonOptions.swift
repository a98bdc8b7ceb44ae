import ArgumentParser
import Foundation

/// Options every benchmark process takes.
struct CommonOptions: ParsableArguments {
    /// The service type; transceivers only talk to peers of the same type.
    @Option(help: "The DNS-SD service type (1–15 lowercase letters, digits, '-').")
    var serviceType = "peerkit-bench"

    /// The process gives up after this long, so that nothing outlives a run.
    @Option(help: "Seconds after which the process exits with an error, whatever it is doing.")
    var timeout: Double = 60

    /// Starts the watchdog that ends the process after ``timeout`` seconds.
    func startWatchdog(_ what: String) {
        let seconds = timeout
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: seconds)
            Report.fail("\(what) did not finish within \(seconds) s; giving up. Raise --timeout if the machine is slow.")
        }
    }
}
