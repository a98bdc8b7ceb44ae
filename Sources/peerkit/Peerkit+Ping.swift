import ArgumentParser
import Foundation
import PeerKit
import ToolSupport

extension Peerkit {
    /// `peerkit ping TYPE NAME`: request round trips and their statistics.
    struct Ping: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure request round trips to a peer, as ping does.",
            discussion: """
            Each probe is a request of wire key "\(Ping.probeKey)" that the peer's dispatcher answers \
            (a peer with no handler for it answers with peerkit.error, which counts as an answer), so the \
            time includes the peer's message queue. A probe not answered within --timeout is lost.
            """
        )

        /// The wire key of the probes: no application is expected to handle it.
        static let probeKey = "peerkit-inspector.ping"

        @Argument(help: ArgumentHelp("The DNS-SD service type, for example listrctl.", valueName: "type"))
        var serviceType: String

        @Argument(help: ArgumentHelp("The name of the peer to ping.", valueName: "name"))
        var peerName: String

        @Option(name: .shortAndLong, help: ArgumentHelp("How many probes to send.", valueName: "count"))
        var count: Int = 5

        @Option(help: ArgumentHelp("Seconds between probes.", valueName: "seconds"))
        var interval: Double = 1

        @OptionGroup var options: PeerOptions

        func validate() throws {
            guard (1...100_000).contains(count) else { throw ValidationError("The count \(count) is not between 1 and 100000.") }
            guard interval >= 0, interval <= 3600 else { throw ValidationError("The interval \(interval) is not between 0 and 3600 seconds.") }
        }

        func run() async throws {
            let transceiver = try options.transceiver(serviceType: serviceType)
            var statistics = RoundTripStatistics()
            do {
                let events = try await options.start(transceiver)
                let peer = try await options.peer(named: peerName, on: transceiver, events: events)
                let clock = ContinuousClock()
                for sequence in 1...count {
                    if sequence > 1 { try await Task.sleep(for: .milliseconds(Int64(interval * 1000))) }
                    let start = clock.now
                    do {
                        _ = try await transceiver.request(RawPeerMessage(type: Self.probeKey, json: "{}"), to: peer, timeout: options.timeoutDuration)
                    } catch let error as PeerKitError where error.code == .remoteError {
                        // The peer's answer to a key it does not handle: a round trip all the same.
                    } catch let error as PeerKitError where error.code == .requestTimedOut {
                        statistics.lost += 1
                        report(sequence: sequence, peer: peer, milliseconds: nil)
                        continue
                    }
                    let milliseconds = (clock.now - start).milliseconds
                    statistics.add(milliseconds)
                    report(sequence: sequence, peer: peer, milliseconds: milliseconds)
                }
                await transceiver.shutdown()
            } catch {
                await transceiver.shutdown()
                throw options.fail(error)
            }
            if options.json {
                Output.line(statistics.object)
            } else {
                Output.text(statistics.summary)
            }
            if statistics.received == 0 { throw ExitStatus.unavailable.exitCode }
        }

        private func report(sequence: Int, peer: Peer, milliseconds: Double?) {
            if options.json {
                var line: [String: Any] = ["seq": sequence, "peer": peer.name]
                line["rttMilliseconds"] = milliseconds
                Output.line(line)
            } else if let milliseconds {
                Output.text("answer from \"\(Output.safe(peer.name))\": seq=\(sequence) time=\(Duration.format(milliseconds: milliseconds))")
            } else {
                Output.text("no answer from \"\(Output.safe(peer.name))\": seq=\(sequence) (waited \(options.timeout) s)")
            }
        }
    }
}
