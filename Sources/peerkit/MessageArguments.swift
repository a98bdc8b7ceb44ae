import ArgumentParser
import Foundation
import PeerKit

/// The message `send` and `request` take: TYPE KEY JSON and the peer to send it to.
struct MessageArguments: ParsableArguments {
    @Argument(help: ArgumentHelp("The DNS-SD service type, for example listrctl.", valueName: "type"))
    var serviceType: String

    @Argument(help: ArgumentHelp("The message's wire key, for example AddItemCommand (a type name, or its PeerMessage.messageType).", valueName: "key"))
    var key: String

    @Argument(help: ArgumentHelp("The payload as JSON text, for example '{\"title\":\"Milk\"}'.", valueName: "json"))
    var json: String

    @Option(help: ArgumentHelp("The name of the peer to send to (default: the first that connects).", valueName: "name"))
    var to: String?

    func validate() throws {
        guard !key.isEmpty, !key.hasPrefix("peerkit.") else {
            throw ValidationError("The wire key \"\(key)\" cannot be sent: it is empty or starts with \"peerkit.\", which the protocol reserves.")
        }
        guard (try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed])) != nil else {
            throw ValidationError("The payload \(json) is not JSON text; quote it for the shell, for example '{\"title\":\"Milk\"}'.")
        }
    }

    /// The message to send.
    var message: RawPeerMessage { RawPeerMessage(type: key, json: json) }
}
