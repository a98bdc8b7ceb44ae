/// The service instances a browser sees, aggregated across interfaces and protocols, and the
/// events that tell the connection layer about them.
///
/// One instance name can be seen on several interfaces and over IPv4 and IPv6, each with its own
/// resolution. The instance is reported as ``DiscoveryEvent/found(_:)`` once any of them has an
/// address, again whenever its endpoints or TXT record change, and as ``DiscoveryEvent/lost(key:)``
/// only when it is gone from every interface. Services whose TXT `peerid` is this peer's own are
/// never reported.
///
/// A value type without Avahi calls, so it is tested on its own.
struct DiscoveredInstances: Sendable {
    /// Where an instance was seen: an interface index and an Avahi protocol.
    struct Location: Sendable, Hashable {
        var interface: Int32
        var isIPv6: Bool
    }

    /// What resolving an instance at one location gave.
    struct Resolution: Sendable, Hashable {
        /// An address literal; IPv6 link-local addresses carry their zone (`fe80::1%eth0`).
        var address: String
        var isIPv4: Bool
        var port: Int
        var txtRecord: [String: String]
    }

    /// The peer ID whose services are this peer's own.
    let ownPeerID: String

    /// Instance name → the locations where it is seen, with their resolution once known.
    private var instances: [String: [Location: Resolution]] = [:]
    /// Instance names seen at a location that are not resolved yet.
    private var pending: [String: Set<Location>] = [:]
    /// What was last reported as found, by instance name.
    private var reported: [String: DiscoveredService] = [:]
    /// True between a lost connection to the daemon and the new browser's first complete listing.
    private var isRefreshing = false
    /// Instance names seen at a location whose first resolution has not answered yet.
    private var resolving: [String: Set<Location>] = [:]
    /// Where the browser is in listing what avahi-daemon already had in its cache.
    private var cacheListing = CacheListing.reading

    private enum CacheListing {
        /// The cache is still being read.
        case reading
        /// The cache is read; resolutions may still be pending.
        case exhausted
        /// ``DiscoveryEvent/knownServicesListed`` was reported.
        case reported
    }

    init(ownPeerID: String) {
        self.ownPeerID = ownPeerID
    }

    /// The services currently reported as found.
    var services: [DiscoveredService] {
        reported.values.sorted { $0.key < $1.key }
    }

    /// The browser saw `name` at `location` (not resolved yet).
    mutating func appeared(_ name: String, at location: Location) {
        if instances[name]?[location] == nil {
            pending[name, default: []].insert(location)
            resolving[name, default: []].insert(location)
        }
    }

    /// Resolving `name` at `location` gave `resolution`.
    mutating func resolved(_ name: String, at location: Location, _ resolution: Resolution) -> DiscoveryEvent? {
        removePending(name, at: location)
        resolutionAnswered(name, at: location)
        instances[name, default: [:]][location] = resolution
        return update(name)
    }

    /// Resolving `name` at `location` failed; the location keeps counting as a presence.
    mutating func resolutionFailed(_ name: String, at location: Location) -> DiscoveryEvent? {
        resolutionAnswered(name, at: location)
        if instances[name]?.removeValue(forKey: location) != nil {
            pending[name, default: []].insert(location)
        }
        return update(name)
    }

    /// The browser no longer sees `name` at `location`.
    mutating func disappeared(_ name: String, at location: Location) -> DiscoveryEvent? {
        removePending(name, at: location)
        resolutionAnswered(name, at: location)
        instances[name]?.removeValue(forKey: location)
        if instances[name]?.isEmpty == true { instances[name] = nil }
        return update(name)
    }

    /// The connection to the daemon was lost and a new browser will list everything again.
    /// What was reported stays reported until ``browserListedAll()`` shows what is really gone.
    mutating func connectionLost() {
        instances = [:]
        pending = [:]
        resolving = [:]
        isRefreshing = true
    }

    /// The browser has listed everything it knows for now (`AVAHI_BROWSER_ALL_FOR_NOW`): after a
    /// lost connection, the instances that were not listed again are lost.
    mutating func browserListedAll() -> [DiscoveryEvent] {
        guard isRefreshing else { return [] }
        isRefreshing = false
        var events: [DiscoveryEvent] = []
        for name in reported.keys.sorted() {
            if let event = update(name) { events.append(event) }
        }
        return events
    }

    /// The browser has read everything avahi-daemon had cached (`AVAHI_BROWSER_CACHE_EXHAUSTED`).
    /// Returns ``DiscoveryEvent/knownServicesListed`` once every instance seen is resolved (or
    /// failed to resolve); otherwise ``knownServicesListedIfSettled()`` returns it later.
    mutating func cacheExhausted() -> DiscoveryEvent? {
        if cacheListing == .reading { cacheListing = .exhausted }
        return knownServicesListedIfSettled()
    }

    /// ``DiscoveryEvent/knownServicesListed``, the first time it is true after the cache was
    /// exhausted and no resolution is pending; nil otherwise.
    mutating func knownServicesListedIfSettled() -> DiscoveryEvent? {
        guard cacheListing == .exhausted, resolving.isEmpty else { return nil }
        cacheListing = .reported
        return .knownServicesListed
    }

    // MARK: - Private

    private mutating func resolutionAnswered(_ name: String, at location: Location) {
        resolving[name]?.remove(location)
        if resolving[name]?.isEmpty == true { resolving[name] = nil }
    }

    private mutating func removePending(_ name: String, at location: Location) {
        pending[name]?.remove(location)
        if pending[name]?.isEmpty == true { pending[name] = nil }
    }

    private func isPresent(_ name: String) -> Bool {
        instances[name] != nil || pending[name] != nil
    }

    /// Compares what is known about `name` with what was reported and says what changed.
    private mutating func update(_ name: String) -> DiscoveryEvent? {
        if let current = service(named: name) {
            guard reported[name] != current else { return nil }
            reported[name] = current
            return .found(current)
        }
        guard !isPresent(name), !isRefreshing, reported.removeValue(forKey: name) != nil else { return nil }
        return .lost(key: name)
    }

    /// The service `name` as the connection layer should see it, or nil when it has no address yet
    /// or is this peer itself.
    private func service(named name: String) -> DiscoveredService? {
        guard let resolutions = instances[name], !resolutions.isEmpty else { return nil }
        // IPv4 first, then by address, so the order does not depend on callback order.
        let ordered = resolutions.values.sorted {
            ($0.isIPv4 ? 0 : 1, $0.address, $0.port) < ($1.isIPv4 ? 0 : 1, $1.address, $1.port)
        }
        guard !ordered.contains(where: { $0.txtRecord["peerid"] == ownPeerID }) else { return nil }
        var endpoints: [PeerEndpoint] = []
        for resolution in ordered {
            let endpoint = PeerEndpoint(host: resolution.address, port: resolution.port)
            if !endpoints.contains(endpoint) { endpoints.append(endpoint) }
        }
        let txtRecord = ordered[0].txtRecord
        return DiscoveredService(key: name, name: name, peerID: txtRecord["peerid"], endpoints: endpoints, txtRecord: txtRecord,
                                 isResolving: resolving[name] != nil)
    }
}
