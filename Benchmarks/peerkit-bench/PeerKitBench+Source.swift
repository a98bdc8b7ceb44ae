import ArgumentParser
import PeerKit
import Synchronization

extension PeerKitBench {
    /// The sending side of one-way throughput and fan-out: dials the sinks (static peers) and
    /// sends `count` payloads, then the end marker.
    struct Source: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send BenchPayloads to every sink as fast as flow control allows."
        )

        /// How the payloads are handed to PeerKit.
        enum API: String, ExpressibleByArgument {
            /// `broadcast(_:)`: fire and forget, encoded once for all peers.
            case broadcast
            /// `try await send(_:to:)` to all peers.
            case send
        }

        @Option(parsing: .upToNextOption, help: "The sinks to dial, as HOST:PORT.")
        var connect: [String]

        @Option(help: "The payload's JSON size in bytes.")
        var size = 100

        @Option(help: "How many payloads to send.")
        var count = 100_000

        @Option(help: "The most unacknowledged payloads; twice the sink's --ack-every. 0: no flow control.")
        var window = 0

        @Option(help: "broadcast or send.")
        var api: API = .broadcast

        @OptionGroup var common: CommonOptions

        func validate() throws {
            guard !connect.isEmpty else { throw ValidationError("Pass at least one sink with --connect HOST:PORT.") }
            guard count >= 1, size >= BenchPayload.jsonOverhead else {
                throw ValidationError("--count must be at least 1 and --size at least \(BenchPayload.jsonOverhead).")
            }
            guard window == 0 || (window >= 2 && window % 2 == 0) else {
                throw ValidationError("--window must be 0 or an even number, twice the sink's --ack-every.")
            }
        }

        func run() async throws {
            let count = count
            let sent = Mutex(0)
            common.startWatchdog("The source") { "\(sent.withLock { $0 }) of \(count) messages sent" }
            let endpoints = BenchTransceiver.endpoints(connect)
            let transceiver = BenchTransceiver.make(serviceType: common.serviceType, name: "source",
                                                    discovery: .staticPeers(endpoints), listens: false, logLevel: common.logLevel, security: common.peerSecurity,
                                                    resumesSessions: common.sessions, oneLoop: common.oneLoop)
            transceiver.reportLostPeers(as: "source")
            try await transceiver.start()
            let peers = await transceiver.waitForConnectedPeers(endpoints.count)
            let flow = SendWindow(receivers: peers.map(\.id))
            transceiver.receive(BenchAck.self) { ack, sender in
                flow.acknowledge(ack.seq, from: sender.id)
            }

            if common.ownCoding {
                try await sendAll(OwnCodedBenchPayload(size: size, seq: 0), with: transceiver, to: peers, flow: flow, sent: sent)
            } else {
                try await sendAll(BenchPayload(size: size, seq: 0), with: transceiver, to: peers, flow: flow, sent: sent)
            }
            await flow.waitForEnd()
            await transceiver.shutdown()
        }

        /// Sends `count` copies of `template`, numbered, within the window, then the end marker.
        private func sendAll<Payload: BenchMessage>(_ template: Payload, with transceiver: PeerTransceiver, to peers: [Peer], flow: SendWindow, sent: borrowing Mutex<Int>) async throws {
            // The options in locals: an `@Option`'s getter looks up generic metadata on every
            // read, which the loop would otherwise pay per message (about 2 % of the source's CPU).
            let window = window, api = api
            for seq in 0..<count {
                if window > 0, seq >= window, seq % (window / 2) == 0 {
                    await flow.waitUntilAcknowledged(seq - window)
                }
                try await Self.send(template.with(seq: seq), with: transceiver, to: peers, api: api)
                sent.withLock { $0 = seq + 1 }
            }
            try await Self.send(template.with(seq: BenchPayload.endOfRun), with: transceiver, to: peers, api: api)
        }

        private static func send<Payload: BenchMessage>(_ payload: Payload, with transceiver: PeerTransceiver, to peers: [Peer], api: API) async throws {
            switch api {
            case .broadcast: transceiver.broadcast(payload)
            case .send: try await transceiver.send(payload, to: peers)
            }
        }
    }
}
