import ArgumentParser
import PeerKit

extension PeerKitBench {
    /// The receiving side of one-way throughput and fan-out: one or more transceivers that count
    /// `BenchPayload`s with a typed handler until the end marker.
    struct Sink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Receive BenchPayloads on one or more transceivers and print the rate each saw."
        )

        @Option(help: "The port to listen on (one receiver only); 0 picks a free one.")
        var port = 0

        @Option(help: "How many receiving transceivers to run in this process (fan-out).")
        var receivers = 1

        @Option(help: "Acknowledge every N messages so the sender's queue stays bounded; 0 only at the end.")
        var ackEvery = 0

        @OptionGroup var common: CommonOptions

        func validate() throws {
            guard receivers >= 1 else { throw ValidationError("--receivers must be at least 1.") }
            guard receivers == 1 || port == 0 else { throw ValidationError("--port needs --receivers 1; several receivers pick free ports.") }
        }

        /// What the sink prints at the end.
        struct Output: Encodable {
            let receivers: [ReceiveCounter.Result]
            let msgsPerSec: Double
            let MBps: Double
        }

        func run() async throws {
            let counters = (0..<receivers).map { _ in ReceiveCounter(ackEvery: ackEvery) }
            common.startWatchdog("The sink") {
                "messages received per receiver: " + counters.map { String($0.messagesSoFar) }.joined(separator: ", ")
            }
            var transceivers: [PeerTransceiver] = []
            for (index, counter) in counters.enumerated() {
                let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "sink-\(index)",
                                                        discovery: .none, listens: true, port: port, logLevel: common.logLevel, security: common.peerSecurity,
                                                    resumesSessions: common.sessions, oneLoop: common.oneLoop)
                if common.ownCoding {
                    counter.install(on: transceiver, receiving: OwnCodedBenchPayload.self)
                } else {
                    counter.install(on: transceiver, receiving: BenchPayload.self)
                }
                transceiver.reportLostPeers(as: "sink-\(index)")
                try await transceiver.start()
                transceivers.append(transceiver)
            }
            let ports = transceivers.map { $0.listeningPort ?? 0 }
            Report.emit(ReadyLine(port: ports[0], ports: ports))

            var results: [ReceiveCounter.Result] = []
            for counter in counters {
                results.append(await counter.result())
            }
            // Per receiver, the slowest one bounds a fan-out.
            Report.emit(Output(receivers: results,
                               msgsPerSec: results.map(\.msgsPerSec).min() ?? 0,
                               MBps: results.map(\.MBps).min() ?? 0))
            for transceiver in transceivers {
                await transceiver.shutdown()
            }
        }
    }
}
