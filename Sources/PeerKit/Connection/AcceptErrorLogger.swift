import Logging
import NIOCore

/// On a listening channel, after NIO's `AcceptBackoffHandler`: logs failures to accept (EMFILE at
/// the descriptor limit, ENOBUFS, ...) once per episode, however many attempts fail.
///
/// An episode starts with the first failure and ends once no attempt has failed for
/// ``quietPeriod``; its end is logged, with the number of failed attempts, at the next accept or
/// failure after that.
final class AcceptErrorLogger: ChannelInboundHandler {
    typealias InboundIn = any Channel

    /// How long accepting must work before an episode of failures counts as over.
    static let quietPeriod: TimeAmount = .seconds(10)

    private struct Episode {
        var started: NIODeadline
        var lastFailure: NIODeadline
        var failures: Int
    }

    private let logger: Logger
    /// The configured address, used until the channel knows its bound one.
    private let configuredAddress: String
    private var episode: Episode?

    init(logger: Logger, address: String) {
        self.logger = logger
        self.configuredAddress = address
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        endEpisodeIfQuiet(context: context)
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        endEpisodeIfQuiet(context: context)
        let now = context.eventLoop.now
        if var current = episode {
            current.failures += 1
            current.lastFailure = now
            episode = current
            return
        }
        episode = Episode(started: now, lastFailure: now, failures: 1)
        logger.error("Accepting a connection on \(address(context)) failed: \(ConnectionManager.describe(error)). Accepting pauses for 1 s after a failure; further failures are counted and this is logged once per episode. At the descriptor limit, raise it (ulimit -n) or lower PeerConfiguration.maximumConnections.")
    }

    private func endEpisodeIfQuiet(context: ChannelHandlerContext) {
        guard let current = episode, context.eventLoop.now - current.lastFailure >= Self.quietPeriod else { return }
        episode = nil
        let span = Duration.nanoseconds((current.lastFailure - current.started).nanoseconds)
        logger.notice("Accepting connections on \(address(context)) works again: \(current.failures) attempts failed over \(span.peerKitSeconds).")
    }

    /// The bound address (the configured port may be 0).
    private func address(_ context: ChannelHandlerContext) -> String {
        context.channel.localAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? configuredAddress
    }
}
