import ArgumentParser
import PeerKit

extension Peerkit {
    /// `peerkit browse TYPE`: the live list of peers.
    struct Browse: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the peers of a service type as they come and go.",
            discussion: """
            Prints a line when a peer is found ("+"), connected ("="), disconnected ("!") or lost ("-"), \
            with its TXT record; "sec" in it is the security mode the peer advertises. \
            Stops on SIGINT, SIGTERM or after --duration.
            """
        )

        @Argument(help: ArgumentHelp("The DNS-SD service type, for example listrctl.", valueName: "type"))
        var serviceType: String

        @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
        var duration: Double?

        @OptionGroup var options: PeerOptions

        func run() async throws {
            let transceiver = try options.transceiver(serviceType: serviceType)
            let events = transceiver.events()
            let printer = Task { [options] in
                for await event in events { Self.print(event, json: options.json) }
            }
            do {
                try await transceiver.start()
            } catch {
                throw options.fail(error)
            }
            await StopSignal.wait(seconds: duration)
            // Our own leaving disconnects every peer: that is not news, so stop printing first.
            printer.cancel()
            await printer.value
            await transceiver.shutdown()
        }

        static func print(_ event: PeerEvent, json: Bool) {
            let (mark, kind, peer): (String, String, Peer)
            switch event {
            case let .peerAdded(found): (mark, kind, peer) = ("+", "found", found)
            case let .peerConnected(found): (mark, kind, peer) = ("=", "connected", found)
            case let .peerDisconnected(found, _): (mark, kind, peer) = ("!", "disconnected", found)
            case let .peerRemoved(found): (mark, kind, peer) = ("-", "lost", found)
            case let .error(error):
                if json { Output.line(["event": "error", "message": error.description]) } else { Output.text("error: \(Output.safe(error.description))") }
                return
            case .started, .availablePeersChanged, .stopped, .knownPeersListed, .peerJoinedGroup, .peerLeftGroup, .peerSuspended, .peerResumed:
                return
            }
            if json {
                var line = PeerJSON.object(peer)
                line["event"] = kind
                if case let .peerDisconnected(_, reason?) = event { line["reason"] = reason.description }
                Output.line(line)
            } else {
                let txt = peer.discoveryInfo.sorted { $0.key < $1.key }.map { "\(Output.safe($0.key))=\(Output.safe($0.value))" }.joined(separator: " ")
                let security = peer.discoveryInfo["sec"].map { "security \(Output.safe($0))" } ?? "security not advertised"
                Output.text("\(mark) \(Output.safe(peer.name))  id \(Output.safe(peer.id))  \(security)\(txt.isEmpty ? "" : "  txt: \(txt)")")
            }
        }
    }
}
