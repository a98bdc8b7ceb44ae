import PeerKit

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
