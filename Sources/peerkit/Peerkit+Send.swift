import ArgumentParser
import PeerKit

extension Peerkit {
    /// `peerkit send TYPE KEY JSON [--to NAME | --group GROUP]`: one message, fire and forget.
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one message to a peer, or to every peer connected once the first one is.",
            discussion: """
            Without --to, the message goes to the peers connected when the first one connects (wait longer with --timeout to reach more). \
            With --group, it goes to the members of the group known when the first member is (peers that joined it with PeerTransceiver.join).
            """
        )

        @OptionGroup var message: MessageArguments
        @OptionGroup var options: PeerOptions

        @Option(help: ArgumentHelp("Send to the members of this group instead of to peers.", valueName: "group"))
        var group: String?

        func validate() throws {
            if group != nil, message.to != nil {
                throw ValidationError("Use --to or --group, not both: a message goes to named peers or to a group's members.")
            }
        }

        func run() async throws {
            let transceiver = try options.transceiver(serviceType: message.serviceType)
            do {
                if let group {
                    try await sendToGroup(group, transceiver: transceiver)
                    return
                }
                let events = try await options.start(transceiver)
                let first = try await options.peer(named: message.to, on: transceiver, events: events)
                let peers = message.to == nil ? transceiver.connectedPeers : [first]
                try await transceiver.send(message.message, to: peers)
                await transceiver.shutdown()
                if options.json {
                    Output.line(["sent": message.key, "to": peers.map(\.name)])
                } else {
                    Output.text("sent \(message.key) to \(peers.map { "\"\(Output.safe($0.name))\"" }.joined(separator: ", "))")
                }
            } catch {
                await transceiver.shutdown()
                throw options.fail(error)
            }
        }

        /// Waits for the first member of `group` to be known, then sends to every member known.
        private func sendToGroup(_ group: String, transceiver: PeerTransceiver) async throws {
            let events = try await options.start(transceiver)
            let timeout = options.timeoutDuration
            let serviceType = message.serviceType
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    for await event in events {
                        if case let .peerJoinedGroup(_, joined) = event, joined == group { return }
                    }
                    throw PeerKitError.notRunning
                }
                tasks.addTask {
                    try await Task.sleep(for: timeout)
                    throw NoGroupMember(group: group, serviceType: serviceType, timeout: timeout)
                }
                defer { tasks.cancelAll() }
                try await tasks.next()
            }
            let peers = try await transceiver.send(message.message, toGroup: group)
            await transceiver.shutdown()
            if options.json {
                Output.line(["sent": message.key, "group": group, "to": peers.map(\.name)])
            } else {
                Output.text("sent \(message.key) to group \"\(Output.safe(group))\": \(peers.map { "\"\(Output.safe($0.name))\"" }.joined(separator: ", "))")
            }
        }
    }
}

/// No member of the group became known in time.
struct NoGroupMember: Error, CustomStringConvertible {
    var group: String
    var serviceType: String
    var timeout: Duration

    var description: String {
        "No peer of service type \"\(serviceType)\" in group \"\(group)\" was found within \(timeout.components.seconds) s. Check that a peer has joined the group, or wait longer with --timeout."
    }
}
