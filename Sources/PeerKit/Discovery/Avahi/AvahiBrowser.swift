import CAvahi
import Glibc
import Logging

/// Browses for one DNS-SD service type and resolves every instance it sees, keeping each resolver
/// open so that address and TXT changes are reported too.
///
/// Every method runs on the Avahi poll thread, or on another thread that holds the threaded
/// poll's lock (see ``AvahiSession``); so do the browser and resolver callbacks.
final class AvahiBrowser {
    private struct ResolverKey: Hashable {
        var name: String
        var location: DiscoveredInstances.Location
    }

    /// `_<serviceType>._tcp`.
    private let type: String
    private let serviceType: String
    private let emit: (DiscoveryEvent) -> Void
    private let logger: Logger

    private var instances: DiscoveredInstances
    /// The service browser on the current client; freed with the client.
    private var browser: OpaquePointer?
    /// One resolver per instance and location; freed with the client.
    private var resolvers: [ResolverKey: OpaquePointer] = [:]

    init(serviceType: String, ownPeerID: String, logger: Logger, emit: @escaping (DiscoveryEvent) -> Void) {
        self.serviceType = serviceType
        self.type = "_\(serviceType)._tcp"
        self.instances = DiscoveredInstances(ownPeerID: ownPeerID)
        self.logger = logger
        self.emit = emit
    }

    /// Starts browsing on `client` (which is running) unless it browses already.
    func browse(on client: OpaquePointer) {
        guard browser == nil else { return }
        browser = avahi_service_browser_new(
            client, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), type, "local", AvahiLookupFlags(0),
            { browser, interface, proto, event, name, _, domain, _, context in
                guard let browser, let context else { return }
                Unmanaged<AvahiBrowser>.fromOpaque(context).takeUnretainedValue()
                    .browserEvent(event, browser: browser, interface: interface, protocol: proto, name: name, domain: domain)
            },
            Unmanaged.passUnretained(self).toOpaque())
        if browser == nil {
            reportFailure("Avahi could not browse for \(type) (\(AvahiError.message(avahi_client_errno(client))))")
        }
    }

    /// The client is about to be freed, and the browser and resolvers with it. What was found stays
    /// reported until the next browser has listed everything again.
    func clientWillBeFreed() {
        browser = nil
        resolvers = [:]
        instances.connectionLost()
    }

    // MARK: - Callbacks

    private func browserEvent(_ event: AvahiBrowserEvent, browser: OpaquePointer, interface: AvahiIfIndex, protocol proto: AvahiProtocol,
                              name: UnsafePointer<CChar>?, domain: UnsafePointer<CChar>?) {
        switch event {
        case AVAHI_BROWSER_NEW:
            guard let name, let client = avahi_service_browser_get_client(browser) else { return }
            let instance = String(cString: name)
            let key = ResolverKey(name: instance, location: Self.location(interface, proto))
            instances.appeared(instance, at: key.location)
            guard resolvers[key] == nil else { return }
            // The address is asked in the family the service was seen on: an instance seen over
            // IPv4 mDNS resolves to its IPv4 address, over IPv6 mDNS to its IPv6 address (with
            // the zone, when link-local). With AVAHI_PROTO_UNSPEC both resolvers could answer
            // with the same family (a Debian avahi-daemon publishes AAAA records on IPv4 mDNS
            // too), and the other family's address would never be dialled.
            let resolver = avahi_service_resolver_new(
                client, interface, proto, name, type, domain, proto, AvahiLookupFlags(0),
                { _, interface, proto, event, name, _, _, _, address, port, txt, _, context in
                    guard let context else { return }
                    Unmanaged<AvahiBrowser>.fromOpaque(context).takeUnretainedValue()
                        .resolverEvent(event, interface: interface, protocol: proto, name: name, address: address, port: port, txt: txt)
                },
                Unmanaged.passUnretained(self).toOpaque())
            if let resolver {
                resolvers[key] = resolver
            } else {
                logger.debug("Avahi could not start resolving", metadata: ["instance": "\(instance)"])
            }
        case AVAHI_BROWSER_REMOVE:
            guard let name else { return }
            let key = ResolverKey(name: String(cString: name), location: Self.location(interface, proto))
            if let resolver = resolvers.removeValue(forKey: key) { avahi_service_resolver_free(resolver) }
            if let event = instances.disappeared(key.name, at: key.location) { emit(event) }
            if let event = instances.knownServicesListedIfSettled() { emit(event) }
        case AVAHI_BROWSER_CACHE_EXHAUSTED:
            // Comes within milliseconds; ALL_FOR_NOW comes about a second later, after the
            // daemon's first query on the network has had time to be answered.
            if let event = instances.cacheExhausted() { emit(event) }
        case AVAHI_BROWSER_ALL_FOR_NOW:
            instances.browserListedAll().forEach(emit)
        case AVAHI_BROWSER_FAILURE:
            let code = avahi_service_browser_get_client(browser).map(avahi_client_errno) ?? 0
            reportFailure("browsing for \(type) failed (\(AvahiError.message(code)))")
        default:
            break
        }
    }

    private func resolverEvent(_ event: AvahiResolverEvent, interface: AvahiIfIndex, protocol proto: AvahiProtocol,
                               name: UnsafePointer<CChar>?, address: UnsafePointer<AvahiAddress>?, port: UInt16,
                               txt: UnsafeMutablePointer<AvahiStringList>?) {
        guard let name else { return }
        let key = ResolverKey(name: String(cString: name), location: Self.location(interface, proto))
        switch event {
        case AVAHI_RESOLVER_FOUND:
            guard let address, let literal = Self.literal(address, interface: interface) else { return }
            let resolution = DiscoveredInstances.Resolution(
                address: literal,
                isIPv4: address.pointee.proto == AvahiProtocol(AVAHI_PROTO_INET),
                port: Int(port),
                txtRecord: TXTRecord.pairs(from: txt))
            if let event = instances.resolved(key.name, at: key.location, resolution) { emit(event) }
            if let event = instances.knownServicesListedIfSettled() { emit(event) }
        default:
            // AVAHI_RESOLVER_FAILURE, usually a timeout: forget this resolver; the instance is
            // resolved again if the browser reports it anew.
            logger.debug("Resolving failed", metadata: ["instance": "\(key.name)", "interface": "\(interface)"])
            if let resolver = resolvers.removeValue(forKey: key) { avahi_service_resolver_free(resolver) }
            if let event = instances.resolutionFailed(key.name, at: key.location) { emit(event) }
            if let event = instances.knownServicesListedIfSettled() { emit(event) }
        }
    }

    // MARK: - Helpers

    private func reportFailure(_ reason: String) {
        logger.warning("Browsing failed", metadata: ["reason": "\(reason)"])
        emit(.failed(.discoveryUnavailable(serviceType: serviceType, reason: reason)))
    }

    private static func location(_ interface: AvahiIfIndex, _ proto: AvahiProtocol) -> DiscoveredInstances.Location {
        DiscoveredInstances.Location(interface: interface, isIPv6: proto == AvahiProtocol(AVAHI_PROTO_INET6))
    }

    private static func string(fromNulTerminated buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The address as a literal to dial; IPv6 link-local addresses get their zone (`fe80::1%eth0`).
    private static func literal(_ address: UnsafePointer<AvahiAddress>, interface: AvahiIfIndex) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
        guard avahi_address_snprint(&buffer, buffer.count, address) != nil else { return nil }
        let literal = string(fromNulTerminated: buffer)
        guard address.pointee.proto == AvahiProtocol(AVAHI_PROTO_INET6), literal.lowercased().hasPrefix("fe80:") else {
            return literal
        }
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE))
        guard if_indextoname(UInt32(bitPattern: interface), &name) != nil else { return literal }
        return "\(literal)%\(string(fromNulTerminated: name))"
    }
}
