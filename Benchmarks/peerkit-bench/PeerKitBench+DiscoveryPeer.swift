import ArgumentParser
import PeerKit

extension PeerKitBench {
    /// One side of the discovery measurements: a transceiver that advertises and browses through
    /// Avahi and prints how long after `resume()` each peer connected.
    struct DiscoveryPeer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "discovery-peer",
            abstract: "Advertise and browse through Avahi; print seconds from resume() to each connection; stop at end of stdin."
        )

        @Option(help: "The name other peers see.")
        var name = "discovery-peer"

        @OptionGroup var common: CommonOptions

        /// Printed when a peer connects.
        struct Connected: Encodable {
            let event = "connected"
            let peer: String
            let seconds: Double
        }

        func run() async throws {
            common.startWatchdog("The discovery peer")
            let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: name,
                                                    discovery: .avahi, listens: true, logLevel: common.logLevel)
            let events = transceiver.events()
            let begin = ContinuousClock.now
            transceiver.resume()
            let reporter = Task {
                for await event in events {
                    switch event {
                    case .started(let port):
                        Report.emit(ReadyLine(port: port, ports: [port]))
                    case .peerConnected(let peer):
                        Report.emit(Connected(peer: peer.name, seconds: ContinuousClock.now.seconds(since: begin)))
                    case .error(let error):
                        Report.fail("Discovery failed: \(error)")
                    default:
                        continue
                    }
                }
            }
            await StandardInput.waitForEnd()
            reporter.cancel()
            await transceiver.shutdown()
        }
    }
}
