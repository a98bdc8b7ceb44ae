import ArgumentParser
import PeerKit

extension Peerkit {
    /// `peerkit request TYPE KEY JSON [--to NAME]`: one request, its reply and the round trip.
    struct Request: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a request to a peer and print its reply and the round-trip time.",
            discussion: "The reply is printed as its wire key and JSON; an error reply (peerkit.error) ends the command with status 1."
        )

        @OptionGroup var message: MessageArguments
        @OptionGroup var options: PeerOptions

        func run() async throws {
            let transceiver = try options.transceiver(serviceType: message.serviceType)
            do {
                let events = try await options.start(transceiver)
                let peer = try await options.peer(named: message.to, on: transceiver, events: events)
                let clock = ContinuousClock()
                let start = clock.now
                let reply = try await transceiver.request(message.message, to: peer, timeout: options.timeoutDuration)
                let milliseconds = (clock.now - start).milliseconds
                await transceiver.shutdown()
                if options.json {
                    Output.line(["from": peer.name, "type": reply.type, "payload": Output.value(ofJSON: reply.json), "rttMilliseconds": milliseconds])
                } else {
                    Output.text("\(Output.safe(reply.type)) \(Output.safe(reply.json))")
                    Output.text("reply from \"\(Output.safe(peer.name))\" in \(Duration.format(milliseconds: milliseconds))")
                }
            } catch {
                await transceiver.shutdown()
                throw options.fail(error)
            }
        }
    }
}
