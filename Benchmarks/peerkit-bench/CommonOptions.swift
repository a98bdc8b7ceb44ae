import ArgumentParser
import Foundation
import Logging
import PeerKit

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

    /// The security of the measured transceivers; every process of one measurement must agree.
    @Option(help: "none (plaintext), psk (TLS 1.2 ECDHE-PSK-CHACHA20-POLY1305 with a fixed benchmark key) or cert (mutual TLS 1.3, each process with its own certificate from a fixed benchmark CA).")
    var security: BenchSecurity = .none

    /// Whether the measured transceivers resume sessions (PeerConfiguration.resumesSessions); every
    /// process of one measurement must agree. Off by default, as in PeerKit.
    @Flag(help: "Turn resumable sessions (feature resume) on, to measure what they cost.")
    var sessions = false

    /// Whether the measured transceivers run on one event loop, with their handlers on it
    /// (PeerConfiguration.handlerExecutor), and `ping`'s requesting task too.
    @Flag(help: "Run the transceiver, its handlers and ping's requests on one event loop (EventLoopTaskExecutor).")
    var oneLoop = false

    /// Whether the payloads sent and received write and read their own JSON
    /// (``OwnCodedBenchPayload``, `PeerPayloadCodable`) instead of going through `Codable`; the
    /// bytes on the wire are the same, so processes may differ in this.
    @Flag(help: "Send and receive a payload type that writes and reads its own JSON (PeerPayloadCodable) instead of Codable's.")
    var ownCoding = false

    /// ``security`` as PeerKit's setting. The psk key is fixed, so that separate processes share it
    /// (loopback only: it protects nothing).
    var peerSecurity: PeerSecurity {
        switch security {
        case .none: return .none
        case .psk:
            // 32 fixed bytes cannot fail PeerKey's length check.
            return (try? PeerKey(bytes: (0..<32).map { UInt8($0) })).map { .preSharedKey($0) } ?? .none
        case .cert:
            do {
                return try BenchAuthority.security()
            } catch {
                Report.fail("The benchmark certificate could not be made: \(error)")
            }
        }
    }

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

/// The values of `--security`.
enum BenchSecurity: String, ExpressibleByArgument {
    case none, psk, cert
}
