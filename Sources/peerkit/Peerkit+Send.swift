import ArgumentParser
import PeerKit

extension Peerkit {
    /// `peerkit send TYPE KEY JSON [--to NAME]`: one message, fire and forget.
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one message to a peer, or to every peer connected once the first one is.",
            discussion: "Without --to, the message goes to the peers connected when the first one connects (wait longer with --timeout to reach more)."
        )

        @OptionGroup var message: MessageArguments
        @OptionGroup var options: PeerOptions

        func run() async throws {
            let transceiver = try options.transceiver(serviceType: message.serviceType)
            do {
                let events = try await options.start(transceiver)
                let first = try await options.peer(named: message.to, on: transceiver, events: events)
                let peers = message.to == nil ? transceiver.connectedPeers : [first]
                try await transceiver.send(message.message, to: peers)
                await transceiver.shutdown()
                if options.json {
                    Output.line(["sent": message.key, "to": peers.map(\.name)])
                } else {
                    Output.text("sent \(message.key) to \(peers.map { "\"\($0.name)\"" }.joined(separator: ", "))")
                }
            } catch {
                await transceiver.shutdown()
                throw options.fail(error)
            }
        }
    }
}
