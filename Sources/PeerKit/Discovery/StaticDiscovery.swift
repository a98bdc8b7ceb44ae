/// Discovery from a fixed list of endpoints: reports each as found at start and never loses one.
///
/// Nothing is advertised; peers that should reach this transceiver list its address themselves.
/// The connection layer keeps redialling an endpoint that does not answer, with back-off.
public final class StaticDiscovery: PeerDiscovery {
    /// The endpoints to dial.
    public let endpoints: [PeerEndpoint]

    /// Creates a backend that reports `endpoints`.
    public init(endpoints: [PeerEndpoint]) {
        self.endpoints = endpoints
    }

    /// Reports every endpoint as a service at once, then ``DiscoveryEvent/knownServicesListed``;
    /// nothing is advertised.
    public func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        for endpoint in endpoints {
            onEvent(.found(DiscoveredService(
                key: "static:\(endpoint)",
                name: endpoint.description,
                peerID: nil,
                endpoints: [endpoint],
                txtRecord: [:]
            )))
        }
        onEvent(.knownServicesListed)
    }

    /// Does nothing: there is nothing to withdraw.
    public func stop() {}
}
