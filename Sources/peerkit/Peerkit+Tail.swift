import ArgumentParser
import PeerKit
import Synchronization

extension Peerkit {
    /// `peerkit tail TYPE`: every message as it arrives.
    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every message sent to the inspector as it arrives: sender, wire key and JSON.",
            discussion: """
            The inspector dials every peer of the type, so it receives what they broadcast and what they \
            send to it. Requests sent to it are printed and not answered (the requester times out). \
            Stops on SIGINT, SIGTERM, after --duration or after --count messages.
            """
        )

        @Argument(help: ArgumentHelp("The DNS-SD service type, for example listrctl.", valueName: "type"))
        var serviceType: String

        @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
        var duration: Double?

        @Option(help: ArgumentHelp("Stop after printing this many messages.", valueName: "messages"))
        var count: Int?

        @OptionGroup var options: PeerOptions

        func validate() throws {
            if let count, count < 1 {
                throw ValidationError("--count must be at least 1: it is the number of messages to print before stopping.")
            }
        }

        func run() async throws {
            let transceiver = try options.transceiver(serviceType: serviceType)
            let json = options.json
            let limit = count
            let (counted, reachedCount) = AsyncStream.makeStream(of: Void.self)
            let printed = Mutex(0)
            transceiver.receiveUnhandled { message, sender in
                // With --count, exactly that many are printed; what arrives after is not.
                let number = printed.withLock { printed -> Int? in
                    if let limit, printed >= limit { return nil }
                    printed += 1
                    return printed
                }
                guard let number else { return }
                defer { if number == limit { reachedCount.yield() } }
                if json {
                    Output.line(["from": sender.name, "fromID": sender.id, "type": message.type, "payload": Output.value(ofJSON: message.json)])
                } else {
                    Output.text("\(Output.safe(sender.name)): \(Output.safe(message.type)) \(Output.safe(message.json))")
                }
            }
            let events = transceiver.events()
            let printer = Task {
                for await event in events {
                    switch event {
                    case .peerConnected, .peerDisconnected, .error:
                        if json { Output.line(["event": event.description]) } else { Output.text("# \(Output.safe(event.description))") }
                    default:
                        continue
                    }
                }
            }
            do {
                try await transceiver.start()
            } catch {
                throw options.fail(error)
            }
            await StopSignal.wait(seconds: duration, orUntil: limit == nil ? nil : counted)
            // Our own leaving disconnects every peer: that is not news, so stop printing first.
            printer.cancel()
            await printer.value
            await transceiver.shutdown()
        }
    }
}
