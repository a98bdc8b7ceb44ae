import NIOCore
import PeerKit

/// A transceiver's way onto a ``TestNetwork``: ``PeerConfiguration/transport`` for the
/// configurations the network makes.
struct TestTransport: PeerTransport {
    let network: TestNetwork
    let nodeID: Int

    func listen(group: any EventLoopGroup, configure: @escaping @Sendable (any Channel) throws -> Void) async throws -> any PeerTransportListener {
        let port = try network.listen(nodeID: nodeID, accept: configure)
        return Listener(network: network, nodeID: nodeID, port: port, eventLoop: group.next())
    }

    func connect(to endpoint: PeerEndpoint, group: any EventLoopGroup, configure: @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<Void> {
        network.connect(from: nodeID, toPort: endpoint.port, configure: configure)
    }

    struct Listener: PeerTransportListener {
        let network: TestNetwork
        let nodeID: Int
        let port: Int
        let eventLoop: any EventLoop

        func close() -> EventLoopFuture<Void> {
            network.stopListening(nodeID: nodeID)
            return eventLoop.makeSucceededVoidFuture()
        }
    }
}

/// A transceiver's discovery on a ``TestNetwork``: it sees the members the network shows it.
final class TestDiscovery: PeerDiscovery {
    let network: TestNetwork
    let nodeID: Int

    init(network: TestNetwork, nodeID: Int) {
        self.network = network
        self.nodeID = nodeID
    }

    func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        network.startDiscovery(nodeID: nodeID, request: request, onEvent: onEvent)
    }

    func stop() {
        network.stopDiscovery(nodeID: nodeID)
    }
}

/// Something that is a member of a ``TestNetwork``: a ``PeerTransceiver`` made from one of its
/// configurations, or a ``FakePeer``. Faults name members.
public protocol TestNetworkMember: Sendable {
    /// The member's node on its network.
    var testNodeID: Int { get }
}

extension PeerTransceiver: TestNetworkMember {
    /// The transceiver's node on its ``TestNetwork``; -1 (no member) for a transceiver that
    /// was not made from ``TestNetwork/configuration(named:serviceType:)``.
    public var testNodeID: Int {
        (configuration.transport as? TestTransport)?.nodeID ?? -1
    }
}

extension TestNetwork {
    /// The clock's reading as an offset from its start.
    var now: Duration {
        clock.elapsed
    }
}
