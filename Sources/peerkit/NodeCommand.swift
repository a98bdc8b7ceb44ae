import Dispatch
import Foundation

/// The commands `peerkit node` reads from standard input, and the signals that stop it.
enum NodeCommand: Sendable {
    case broadcast(String)
    /// `join GROUP`, `leave GROUP`: change this node's groups.
    case join(String)
    case leave(String)
    /// `shout GROUP TEXT`: send a `NodeMessage` to the members of GROUP.
    case shout(group: String, text: String)
    /// `stream COUNT SECONDS PREFIX`: broadcast COUNT messages, PREFIX1 to PREFIXCOUNT, evenly
    /// over SECONDS, while other commands go on.
    case stream(count: Int, seconds: Double, prefix: String)
    case peers
    case quit
    case unknown(String)

    init(line: String) {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed == "quit" {
            self = .quit
        } else if trimmed == "peers" {
            self = .peers
        } else if trimmed.hasPrefix("broadcast ") {
            self = .broadcast(String(trimmed.dropFirst("broadcast ".count)))
        } else if trimmed.hasPrefix("join ") {
            self = .join(String(trimmed.dropFirst("join ".count)))
        } else if trimmed.hasPrefix("leave ") {
            self = .leave(String(trimmed.dropFirst("leave ".count)))
        } else if trimmed.hasPrefix("stream ") {
            let parts = trimmed.split(separator: " ")
            if parts.count == 4, let count = Int(parts[1]), count > 0, let seconds = Double(parts[2]), seconds >= 0 {
                self = .stream(count: count, seconds: seconds, prefix: String(parts[3]))
            } else {
                self = .unknown(trimmed)
            }
        } else if trimmed.hasPrefix("shout "), let space = trimmed.dropFirst("shout ".count).firstIndex(of: " ") {
            let rest = trimmed.dropFirst("shout ".count)
            self = .shout(group: String(rest[..<space]), text: String(rest[rest.index(after: space)...]))
        } else {
            self = .unknown(trimmed)
        }
    }

    /// Lines of standard input as commands; `quit` at end of input, SIGTERM or SIGINT. The
    /// continuation lets others add commands; keep the signal sources alive while reading.
    static func stream() -> ((stream: AsyncStream<NodeCommand>, continuation: AsyncStream<NodeCommand>.Continuation), [any DispatchSourceSignal]) {
        let (stream, continuation) = AsyncStream.makeStream(of: NodeCommand.self)
        let reader = Thread {
            while let line = readLine() {
                continuation.yield(NodeCommand(line: line))
            }
            continuation.yield(.quit)
        }
        reader.start()
        let sources = [SIGTERM, SIGINT].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield(.quit) }
            source.resume()
            return source
        }
        return ((stream, continuation), sources)
    }
}
