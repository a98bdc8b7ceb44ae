import PeerKit

/// How `peerkit` prints a peer in JSON lines.
enum PeerJSON {
    static func object(_ peer: Peer) -> [String: Any] {
        var object: [String: Any] = ["id": peer.id, "name": peer.name, "connected": peer.isConnected, "info": peer.discoveryInfo]
        if let security = peer.discoveryInfo["sec"] { object["security"] = security }
        if let fingerprint = peer.fingerprint { object["fingerprint"] = fingerprint }
        return object
    }
}
