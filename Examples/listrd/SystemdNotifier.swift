import Foundation
import Logging
import NIOCore
import NIOPosix
import PeerKit

/// Tells systemd how listrd is doing, as `sd_notify(3)` does (``ListrService`` sends `READY=1`
/// once the transceiver listens, `STOPPING=1` when it stops). Does nothing unless systemd set
/// `NOTIFY_SOCKET` (`Type=notify` in the unit).
struct SystemdNotifier: Sendable {
    /// The socket's path, from `NOTIFY_SOCKET`; nil outside systemd.
    let socketPath: String?
    let logger: Logger

    init(environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) {
        let path = environment["NOTIFY_SOCKET"] ?? ""
        self.socketPath = path.isEmpty ? nil : path
        self.logger = logger
    }

    /// Sends one datagram with `state` to the notification socket.
    func send(_ state: String) async {
        guard let socketPath else { return }
        guard socketPath.hasPrefix("/") else {
            // An abstract socket ("@…") cannot be named through SocketAddress; systemd's own
            // manager uses a path (/run/systemd/notify).
            logger.warning("NOTIFY_SOCKET \(socketPath) is an abstract socket, which listrd cannot reach; systemd is not told that listrd is ready.")
            return
        }
        do {
            let address = try SocketAddress(unixDomainSocketPath: socketPath)
            let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(to: address)
                .get()
            let buffer = channel.allocator.buffer(string: state)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: buffer)).get()
            try await channel.close().get()
        } catch {
            logger.warning("Could not tell systemd \(state.debugDescription) through \(socketPath): \(error).")
        }
    }
}
