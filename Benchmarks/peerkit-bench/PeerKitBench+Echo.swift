import ArgumentParser
import PeerKit

extension PeerKitBench {
    /// The responding side of request/reply: answers each `BenchPayload` request with the same payload.
    struct Echo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Answer BenchPayload requests with the same payload until the requester leaves."
        )

        @Option(help: "The port to listen on; 0 picks a free one.")
        var port = 0

        /// Answer with `respondImmediately(to:using:)`, on the connection's event loop as each
        /// request is read, instead of `respond(to:using:)`'s handler task.
        @Flag(help: "Answer with respondImmediately (on the event loop, as each request is read) instead of respond(to:using:).")
        var immediate = false

        @OptionGroup var common: CommonOptions

        func run() async throws {
            common.startWatchdog("The echo server")
            let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "echo",
                                                    discovery: .none, listens: true, port: port, logLevel: common.logLevel, security: common.peerSecurity,
                                                    resumesSessions: common.sessions, oneLoop: common.oneLoop)
            switch (common.ownCoding, immediate) {
            case (true, true): transceiver.respondImmediately(to: OwnCodedBenchPayload.self) { request, _ in request }
            case (true, false): transceiver.respond(to: OwnCodedBenchPayload.self) { request, _ in request }
            case (false, true): transceiver.respondImmediately(to: BenchPayload.self) { request, _ in request }
            case (false, false): transceiver.respond(to: BenchPayload.self) { request, _ in request }
            }
            let events = transceiver.events()
            try await transceiver.start()
            Report.emit(ReadyLine(port: transceiver.listeningPort ?? 0, ports: [transceiver.listeningPort ?? 0]))
            await events.firstDisconnection()
            await transceiver.shutdown()
        }
    }
}
