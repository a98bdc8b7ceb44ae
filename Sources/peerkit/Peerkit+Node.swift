import ArgumentParser
import Dispatch
import Foundation
import Logging
import PeerKit

/// The message `peerkit node` processes exchange (wire key `NodeMessage`).
struct NodeMessage: Codable, Sendable {
    var text: String
}

extension Peerkit {
    /// `peerkit node TYPE`: a diagnostic PeerKit node: joins a service type, prints what happens as JSON
    /// lines, and takes commands on standard input. Scripts and tests drive it.
    struct Node: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Join a service type, print its events as JSON lines and take commands on standard input.",
            discussion: """
            Commands on standard input, one per line: `broadcast TEXT`, `join GROUP`, `leave GROUP`,
            `shout GROUP TEXT` (to the members of GROUP only), `stream COUNT SECONDS PREFIX` (broadcast
            PREFIX1 … PREFIXCOUNT evenly over SECONDS; `streamed` reports the end), `peers`, `quit`.
            SIGTERM and SIGINT stop the node gracefully.
            """
        )

        @Argument(help: ArgumentHelp("The DNS-SD service type to join.", valueName: "type"))
        var serviceType: String

        @Flag(help: "Do not listen or advertise; only dial.")
        var noAdvertise = false

        @Option(help: "A discovery info pair KEY=VALUE (repeatable).")
        var info: [String] = []

        @Option(help: "Seconds of idleness before a peer is pinged.")
        var heartbeatInterval: Double?

        @Option(help: "Seconds of silence before a peer is disconnected.")
        var peerTimeout: Double?

        @Option(help: "Seconds before the first redial of a lost peer (default 0.5).")
        var reconnectInitial: Double?

        @Option(help: "The longest wait, in seconds, between redials of a lost peer (default 30).")
        var reconnectMaximum: Double?

        @OptionGroup var options: PeerOptions

        mutating func validate() throws {
            for entry in info where !entry.contains("=") {
                throw ValidationError("\"\(entry)\" is not KEY=VALUE; write for example --info role=store.")
            }
        }

        func run() async throws {
            // A node is a peer like any other: it advertises unless told not to, under the host name.
            var configuration = try options.configuration(serviceType: serviceType)
            configuration.peerName = options.name ?? PeerConfiguration.defaultPeerName
            configuration.advertises = !noAdvertise
            for entry in info {
                let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                configuration.discoveryInfo[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
            }
            if let heartbeatInterval { configuration.heartbeatInterval = .milliseconds(Int(heartbeatInterval * 1000)) }
            if let peerTimeout { configuration.peerTimeout = .milliseconds(Int(peerTimeout * 1000)) }
            if let reconnectInitial { configuration.reconnectBackoff.initial = .milliseconds(Int(reconnectInitial * 1000)) }
            if let reconnectMaximum { configuration.reconnectBackoff.maximum = .milliseconds(Int(reconnectMaximum * 1000)) }
            configuration.logger.logLevel = options.verbose ? .debug : .warning

            let (commands, signalSources) = NodeCommand.stream()
            defer { withExtendedLifetime(signalSources) {} }
            let output = JSONLines { commands.continuation.yield(.quit) }
            let transceiver = PeerTransceiver(configuration: configuration)
            transceiver.receive(NodeMessage.self) { message, sender in
                output.write(["event": "message", "from": Self.describe(sender), "text": message.text])
            }
            let events = transceiver.events()
            let eventTask = Task {
                for await event in events {
                    output.write(Self.describe(event, transceiver: transceiver))
                    if case .stopped = event { return }
                }
            }

            do {
                try await transceiver.start()
            } catch {
                output.write(["event": "error", "message": "\(error)"])
                throw ExitCode.failure
            }

            // Streams run beside the commands, as child tasks; `quit` cancels them.
            await withDiscardingTaskGroup { streams in
                for await command in commands.stream {
                    switch command {
                    case let .broadcast(text):
                        transceiver.broadcast(NodeMessage(text: text))
                    case let .join(group):
                        do {
                            try transceiver.join(group)
                            output.write(["event": "joined", "group": group])
                        } catch {
                            output.write(["event": "error", "message": "\(error)"])
                        }
                    case let .leave(group):
                        transceiver.leave(group)
                        output.write(["event": "left", "group": group])
                    case let .shout(group, text):
                        do {
                            let reached = try await transceiver.send(NodeMessage(text: text), toGroup: group)
                            output.write(["event": "shouted", "group": group, "peers": reached.map(Self.describe)])
                        } catch {
                            output.write(["event": "error", "message": "\(error)"])
                        }
                    case let .stream(count, seconds, prefix):
                        streams.addTask {
                            let clock = ContinuousClock()
                            let start = clock.now
                            for number in 1...count {
                                // On schedule, whatever each broadcast took: message n goes at (n - 1) / count of the time.
                                let due = start + .milliseconds(Int(seconds * 1000 * Double(number - 1) / Double(count)))
                                if due > clock.now { try? await clock.sleep(until: due) }
                                if Task.isCancelled { return }
                                transceiver.broadcast(NodeMessage(text: "\(prefix)\(number)"))
                            }
                            output.write(["event": "streamed", "prefix": prefix, "count": count])
                        }
                    case .peers:
                        output.write(["event": "peers", "peers": transceiver.availablePeers.map(Self.describe)])
                    case let .unknown(line):
                        output.write(["event": "error", "message": "Unknown command \"\(line)\"; use broadcast TEXT, join GROUP, leave GROUP, shout GROUP TEXT, stream COUNT SECONDS PREFIX, peers or quit."])
                    case .quit:
                        streams.cancelAll()
                        await transceiver.shutdown()
                        // The event task ends after printing the stopped event.
                        await eventTask.value
                        return
                    }
                }
            }
        }

        static func describe(_ peer: Peer) -> [String: Any] {
            ["id": peer.id, "name": peer.name, "connected": peer.isConnected, "info": peer.discoveryInfo]
        }

        static func describe(_ event: PeerEvent, transceiver: PeerTransceiver) -> [String: Any] {
            switch event {
            case let .started(port):
                return ["event": "started", "peerID": transceiver.peerID, "name": transceiver.configuration.peerName, "port": port]
            case let .peerAdded(peer): return ["event": "peerAdded", "peer": describe(peer)]
            case let .peerRemoved(peer): return ["event": "peerRemoved", "peer": describe(peer)]
            case let .peerConnected(peer): return ["event": "peerConnected", "peer": describe(peer)]
            case let .peerDisconnected(peer, reason):
                var line: [String: Any] = ["event": "peerDisconnected", "peer": describe(peer)]
                if let reason { line["reason"] = reason.description }
                return line
            case let .peerSuspended(peer, reason):
                var line: [String: Any] = ["event": "peerSuspended", "peer": describe(peer)]
                if let reason { line["reason"] = reason.description }
                return line
            case let .peerResumed(peer): return ["event": "peerResumed", "peer": describe(peer)]
            case let .availablePeersChanged(peers): return ["event": "availablePeersChanged", "peers": peers.map(describe)]
            case .knownPeersListed: return ["event": "knownPeersListed"]
            case let .peerJoinedGroup(peer, group): return ["event": "peerJoinedGroup", "peer": describe(peer), "group": group]
            case let .peerLeftGroup(peer, group): return ["event": "peerLeftGroup", "peer": describe(peer), "group": group]
            case let .error(error): return ["event": "error", "message": error.description]
            case .stopped: return ["event": "stopped"]
            }
        }
    }
}
