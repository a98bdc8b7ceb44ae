import Foundation
import Logging
import PeerKit

/// Builds the transceivers the measurements use: loopback only, logging warnings to stderr
/// (stdout carries the JSON lines the harness reads).
enum BenchTransceiver {
    /// A transceiver of `serviceType` that finds peers with `discovery`.
    ///
    /// - Parameters:
    ///   - listens: whether it listens (and, with Avahi, advertises); a pure dialler does not.
    ///   - port: the port to listen on; 0 picks a free one.
    ///   - logLevel: the lowest level logged (on stderr).
    static func make(serviceType: String, name: String, discovery: PeerConfiguration.Discovery,
                     listens: Bool, port: Int = 0, logLevel: Logger.Level = .warning) -> PeerTransceiver {
        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = name
        configuration.discovery = discovery
        configuration.advertises = listens
        configuration.listenHost = "127.0.0.1"
        configuration.listenPort = port
        var logger = Logger(label: "peerkit-bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = logLevel
        configuration.logger = logger
        return PeerTransceiver(configuration: configuration)
    }

    /// Parses `HOST:PORT` arguments into endpoints, or fails with a sentence.
    static func endpoints(_ arguments: [String]) -> [PeerEndpoint] {
        arguments.map { argument in
            guard let endpoint = PeerEndpoint(argument) else {
                Report.fail("\"\(argument)\" is not an endpoint; pass HOST:PORT, for example 127.0.0.1:5000.")
            }
            return endpoint
        }
    }
}

extension PeerTransceiver {
    /// Waits until at least `count` peers are connected. The process watchdog bounds the wait.
    func waitForConnectedPeers(_ count: Int) async -> [Peer] {
        let events = events()
        if connectedPeers.count >= count { return connectedPeers }
        for await event in events {
            if case .peerConnected = event, connectedPeers.count >= count { break }
            if case .error(let error) = event {
                FileHandle.standardError.write(Data("peerkit-bench: while waiting for peers: \(error)\n".utf8))
            }
        }
        return connectedPeers
    }

    /// Says on stderr when this transceiver loses a peer other than by a graceful bye, and why,
    /// so that a stalled run leaves a trace.
    func reportLostPeers(as name: String) {
        let events = events()
        Task {
            for await event in events {
                if case let .peerDisconnected(peer, reason?) = event {
                    FileHandle.standardError.write(Data("peerkit-bench: \(name) lost \(peer): \(reason)\n".utf8))
                }
            }
        }
    }
}

extension AsyncStream<PeerEvent> {
    /// Returns at the first disconnection (or stop) in the stream.
    func firstDisconnection() async {
        for await event in self {
            switch event {
            case .peerDisconnected, .stopped: return
            default: continue
            }
        }
    }
}

/// Standard input, read on its own thread.
enum StandardInput {
    /// Returns when standard input reaches its end: the harness closes it to end a process.
    static func waitForEnd() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                while let _ = readLine(strippingNewline: true) {}
                continuation.resume()
            }
        }
    }
}
