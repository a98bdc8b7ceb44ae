import Foundation
import Logging
import NIOPosix
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
    ///   - resumesSessions: whether resumable sessions (feature `resume`) are on, to measure their cost.
    ///   - oneLoop: whether the transceiver runs on ``oneLoop``'s event loop, its handlers too.
    static func make(serviceType: String, name: String, discovery: PeerConfiguration.Discovery,
                     listens: Bool, port: Int = 0, logLevel: Logger.Level = .warning,
                     security: PeerSecurity = .none, resumesSessions: Bool = false,
                     oneLoop: Bool = false) -> PeerTransceiver {
        var configuration = PeerConfiguration(serviceType: serviceType)
        configuration.peerName = name
        configuration.discovery = discovery
        configuration.advertises = listens
        configuration.listenHost = "127.0.0.1"
        configuration.listenPort = port
        configuration.security = security
        configuration.resumesSessions = resumesSessions
        if oneLoop {
            configuration.eventLoopGroup = Self.oneLoop.eventLoop
            configuration.handlerExecutor = Self.oneLoop
        }
        var logger = Logger(label: "peerkit-bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = logLevel
        configuration.logger = logger
        return PeerTransceiver(configuration: configuration)
    }

    /// The process's one event loop, as a task executor, for `--one-loop`.
    static let oneLoop = EventLoopTaskExecutor(MultiThreadedEventLoopGroup(numberOfThreads: 1).next())

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
