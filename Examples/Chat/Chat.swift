// chat: a terminal chat on PeerKit, to read in one sitting.
//
// Every peer of the same service type (and passphrase) on the network finds the others, by
// itself, through Avahi (or through `--peer HOST:PORT` where there is no Avahi). It shows the
// parts of PeerKit an app uses most:
//
//   rooms            PeerKit's groups: join, leave, send to a group, hear who joins and leaves
//   direct messages  send(_:to:) to one peer
//   a request        /who asks every peer, each answers with its name and its rooms
//   a key            PeerKey(passphrase:): TLS between the peers that know the passphrase
//   events           transceiver.events(): connected, disconnected, joined, left, errors
//
//   $ chat --name alice --passphrase 'correct horse'
//   /join kitchen          join a room; it becomes the current room
//   hello                  plain text goes to the current room
//   /msg bob psst          a direct message to the peer named bob
//   /who                   who is there, and in which rooms
//   /leave kitchen         leave a room
//   /quit                  (or end of input)
//
// Every line it prints goes to standard output, one event per line, so a script (or a test)
// can read it; errors go to standard error.

import ArgumentParser
import Foundation
import PeerKit

// MARK: What peers send each other

/// A line said in a room. It carries the room's name: a peer may be in several rooms.
struct RoomMessage: Codable, PeerMessage {
    static var messageType: String { "chat.room" }
    var room: String
    var text: String
}

/// A line said to one peer.
struct DirectMessage: Codable, PeerMessage {
    static var messageType: String { "chat.direct" }
    var text: String
}

/// The `/who` request, and each peer's answer.
struct WhoRequest: Codable, PeerMessage {
    static var messageType: String { "chat.who" }
}

struct WhoAnswer: Codable, PeerMessage {
    static var messageType: String { "chat.who.answer" }
    var name: String
    var rooms: [String]
}

// MARK: The command

@main
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A terminal chat with rooms, direct messages and /who, on PeerKit.")

    @Option(help: "The name other peers see.")
    var name: String = PeerConfiguration.defaultPeerName

    @Option(help: "A passphrase every peer of the chat shares; without one, peers talk in plaintext.")
    var passphrase: String?

    @Option(help: "The DNS-SD service type: peers of other service types are not seen.")
    var serviceType: String = "peerchat"

    @Option(help: "A peer to connect to, as HOST:PORT, instead of finding peers through Avahi (repeatable).")
    var peer: [String] = []

    @Option(help: "The TCP port to listen on (0: any free port).")
    var port: Int = 0

    @Option(help: "The address to listen on.")
    var listenHost: String = "0.0.0.0"

    func run() async throws {
        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = name
        configuration.listenHost = listenHost
        configuration.listenPort = port
        if let passphrase {
            // The same passphrase gives the same key on every peer; a peer without it is refused.
            configuration.security = .preSharedKey(try PeerKey(passphrase: passphrase))
        }
        if !peer.isEmpty {
            configuration.discovery = .staticPeers(try peer.map(Self.endpoint))
        }
        let transceiver = PeerTransceiver(configuration: configuration)
        let room = CurrentRoom()
        let name = self.name

        // What arrives. Handlers are set before the transceiver starts, so nothing is missed.
        transceiver.receive(RoomMessage.self) { message, sender in
            say("[#\(message.room)] \(sender.name): \(message.text)")
        }
        transceiver.receive(DirectMessage.self) { message, sender in
            say("(direct) \(sender.name): \(message.text)")
        }
        // Answered from what the transceiver holds, without waiting for anything: on the
        // network thread, as the request is read.
        transceiver.respondImmediately(to: WhoRequest.self) { _, _ in
            WhoAnswer(name: name, rooms: transceiver.groups)
        }

        let events = transceiver.events()
        try await transceiver.start()
        say("ready: \(name) listens on port \(transceiver.listeningPort ?? 0)")

        // Two loops side by side: events from the transceiver, lines from the user. The chat
        // ends when the user's input does.
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for await event in events { show(event) }
            }
            for await line in standardInputLines() {
                if line == "/quit" { break }
                await handle(line, transceiver: transceiver, room: room)
            }
            await transceiver.shutdown()
            tasks.cancelAll()
        }
    }

    /// `HOST:PORT` as an endpoint.
    static func endpoint(_ text: String) throws -> PeerEndpoint {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
            throw ValidationError("\"\(text)\" is not HOST:PORT; give a peer as, for example, 127.0.0.1:7000.")
        }
        return PeerEndpoint(host: String(text[..<colon]), port: port)
    }
}

// MARK: The user's commands

/// The room plain text goes to: the one joined last.
actor CurrentRoom {
    var name: String?
    func set(_ name: String?) { self.name = name }
}

/// Does what one line of input asks.
func handle(_ line: String, transceiver: PeerTransceiver, room: CurrentRoom) async {
    let words = line.split(separator: " ", maxSplits: 2).map(String.init)
    do {
        switch words.first {
        case "/join" where words.count == 2:
            try transceiver.join(words[1])
            await room.set(words[1])
            say("joined #\(words[1])")
        case "/leave" where words.count == 2:
            transceiver.leave(words[1])
            if await room.name == words[1] { await room.set(transceiver.groups.last) }
            say("left #\(words[1])")
        case "/msg" where words.count == 3:
            guard let peer = transceiver.connectedPeers.first(where: { $0.name == words[1] }) else {
                return complain("No peer named \(words[1]) is connected; /who lists who is.")
            }
            try await transceiver.send(DirectMessage(text: words[2]), to: [peer])
        case "/who":
            await who(transceiver)
        case let command? where command.hasPrefix("/"):
            complain("\(line) is not a command this chat knows (or lacks its argument); use /join ROOM, /leave ROOM, /msg NAME TEXT, /who or /quit.")
        case _ where !line.isEmpty:
            guard let current = await room.name else { return complain("Join a room first: /join ROOM.") }
            // A room message goes to the room's members only; we are one, but not sent to ourselves.
            try await transceiver.send(RoomMessage(room: current, text: line), toGroup: current)
        default:
            break
        }
    } catch {
        // PeerKit's errors are sentences: what happened, and what to do.
        complain("\(error)")
    }
}

/// Asks every connected peer who it is and which rooms it is in, all at once; prints each
/// answer as it comes, then how many answered.
func who(_ transceiver: PeerTransceiver) async {
    let peers = transceiver.connectedPeers
    let answers = await withTaskGroup(of: Bool.self) { tasks in
        for peer in peers {
            tasks.addTask {
                do {
                    let answer = try await transceiver.request(WhoRequest(), to: peer, expecting: WhoAnswer.self, timeout: .seconds(5))
                    let rooms = answer.rooms.isEmpty ? "no room" : answer.rooms.map { "#\($0)" }.joined(separator: " ")
                    say("who: \(answer.name) in \(rooms)")
                    return true
                } catch {
                    complain("\(peer.name) did not say who it is: \(error)")
                    return false
                }
            }
        }
        return await tasks.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
    say("who: \(answers) of \(peers.count) peers answered")
}

// MARK: Events

/// One line for each event a person cares about.
func show(_ event: PeerEvent) {
    switch event {
    case let .peerConnected(peer):
        say("* \(peer.name) is here")
    case let .peerDisconnected(peer, reason):
        say("* \(peer.name) left" + (reason.map { ": \($0)" } ?? ""))
    case let .peerJoinedGroup(peer, group):
        say("* \(peer.name) joined #\(group)")
    case let .peerLeftGroup(peer, group):
        say("* \(peer.name) left #\(group)")
    case let .error(error):
        complain("\(error)")
    default:
        break
    }
}

// MARK: Terminal

/// Writes a line to standard output at once (not buffered: another program may be reading).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes a line to standard error.
func complain(_ line: String) {
    FileHandle.standardError.write(Data(("error: " + line + "\n").utf8))
}

/// The lines of standard input, read on a thread of their own (reading blocks).
func standardInputLines() -> AsyncStream<String> {
    AsyncStream { continuation in
        Thread.detachNewThread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
    }
}
