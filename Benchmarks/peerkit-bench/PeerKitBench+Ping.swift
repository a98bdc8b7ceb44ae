import ArgumentParser
import PeerKit

extension PeerKitBench {
    /// The measuring side of request/reply: `request(_:to:expecting:)` one at a time, each timed.
    struct Ping: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send BenchPayload requests one at a time and print the round-trip percentiles."
        )

        @OptionGroup var trips: RoundTripOptions

        @OptionGroup var common: CommonOptions

        func run() async throws {
            common.startWatchdog("The requester")
            let endpoints = BenchTransceiver.endpoints([trips.connect])
            let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "ping",
                                                    discovery: .staticPeers(endpoints), listens: false, logLevel: common.logLevel, security: common.peerSecurity,
                                                    resumesSessions: common.sessions, oneLoop: common.oneLoop)
            let connectBegin = ContinuousClock.now
            try await transceiver.start()
            guard let peer = await transceiver.waitForConnectedPeers(1).first else {
                Report.fail("No echo server connected at \(trips.connect).")
            }
            let connectMilliseconds = ContinuousClock.now.seconds(since: connectBegin) * 1000
            let samples = common.ownCoding
                ? try await roundTrips(OwnCodedBenchPayload(size: trips.size, seq: 0), with: transceiver, to: peer)
                : try await roundTrips(BenchPayload(size: trips.size, seq: 0), with: transceiver, to: peer)
            var summary = LatencySummary(samples: samples)
            summary.connectMs = connectMilliseconds
            Report.emit(summary)
            await transceiver.shutdown()
        }

        /// The round trips' times in µs: `warmup` untimed, then `count` timed requests of `template`.
        private func roundTrips<Payload: BenchMessage>(_ template: Payload, with transceiver: PeerTransceiver, to peer: Peer) async throws -> [Double] {
            let timed = trips.count, warmup = trips.warmup
            // With --one-loop the requests are made from the transceiver's loop, as
            // EventLoopTaskExecutor's documentation shows; otherwise from the task's own thread.
            return try await withTaskExecutorPreference(common.oneLoop ? BenchTransceiver.oneLoop : nil) {
                var samples: [Double] = []
                samples.reserveCapacity(timed)
                let clock = ContinuousClock()
                for index in 0..<(warmup + timed) {
                    let begin = clock.now
                    let reply = try await transceiver.request(template.with(seq: index), to: peer,
                                                              expecting: Payload.self, timeout: .seconds(10))
                    let end = clock.now
                    guard reply.seq == index else {
                        Report.fail("Request \(index) was answered with the reply to \(reply.seq).")
                    }
                    if index >= warmup {
                        samples.append(end.seconds(since: begin) * 1e6)
                    }
                }
                return samples
            }
        }
    }
}
