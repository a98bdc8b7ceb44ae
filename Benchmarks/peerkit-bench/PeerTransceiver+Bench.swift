import Foundation
import PeerKit

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
