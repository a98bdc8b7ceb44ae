import Logging

// PLACEHOLDER until the Avahi backend branch is merged.
/// DNS-SD discovery through avahi-daemon.
public final class AvahiDiscovery: PeerDiscovery {
    private let logger: Logger
    /// Creates the backend.
    public init(logger: Logger = Logger(label: "PeerKit.Avahi")) { self.logger = logger }
    public func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        onEvent(.failed(.discoveryUnavailable(serviceType: request.serviceType, reason: "the Avahi backend is not built yet")))
    }
    public func stop() {}
}
