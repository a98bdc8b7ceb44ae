import ArgumentParser
import PeerKit

extension PeerKitBench {
    /// A new transceiver joining a peer that is already advertised: `resume()` to connected,
    /// repeated with a fresh transceiver each time.
    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start fresh transceivers next to an advertised peer; print seconds from resume() to connected."
        )

        @Option(help: "How many fresh transceivers to start, one after the other.")
        var iterations = 6

        @OptionGroup var common: CommonOptions

        /// What the joiner prints.
        struct Output: Encodable {
            let samples: [Double]
            let medianSeconds: Double
        }

        func validate() throws {
            guard iterations >= 1 else { throw ValidationError("--iterations must be at least 1.") }
        }

        func run() async throws {
            common.startWatchdog("The joiner")
            var samples: [Double] = []
            for iteration in 0..<iterations {
                let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "joiner-\(iteration)",
                                                        discovery: .avahi, listens: true, logLevel: common.logLevel)
                let events = transceiver.events()
                let begin = ContinuousClock.now
                transceiver.resume()
                eventLoop: for await event in events {
                    switch event {
                    case .peerConnected:
                        samples.append(ContinuousClock.now.seconds(since: begin))
                        break eventLoop
                    case .error(let error):
                        Report.fail("Joiner \(iteration) failed: \(error)")
                    default:
                        continue
                    }
                }
                await transceiver.shutdown()
            }
            Report.emit(Output(samples: samples, medianSeconds: samples.sorted()[samples.count / 2]))
        }
    }
}
