/// A way of finding peers: the seam between discovery backends (Avahi DNS-SD, a static list,
/// your own) and the connection layer, which dials what discovery finds.
///
/// A backend is started once and stopped once. It reports what it finds through the event
/// closure, from any thread; the closure is cheap and never blocks.
public protocol PeerDiscovery: AnyObject, Sendable {
    /// Starts advertising (when `request.port` is set) and browsing.
    ///
    /// Must not block and must not throw: a backend that cannot work reports
    /// ``DiscoveryEvent/failed(_:)`` and keeps trying to recover where that makes sense.
    func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void)

    /// Stops advertising and browsing and releases every resource. No event is delivered after
    /// `stop()` returns. Calling it twice is harmless.
    func stop()
}

/// What a transceiver asks its discovery backend to advertise and browse for.
public struct DiscoveryRequest: Sendable, Hashable {
    /// The service type without underscores or protocol, e.g. `"listrctl"` for `_listrctl._tcp`.
    public var serviceType: String
    /// This transceiver's peer ID; services carrying it are this transceiver itself and are ignored.
    public var peerID: String
    /// The instance name to advertise.
    public var peerName: String
    /// The TCP port to advertise, or `nil` to browse without advertising.
    public var port: Int?
    /// TXT record pairs to advertise: `peerid`, `proto` and the user's discovery info.
    public var txtRecord: [String: String]
    /// The address families the transceiver listens on: the service is advertised on these only
    /// (Avahi: on IPv4 mDNS, IPv6 mDNS or both), so that peers are not told addresses on which
    /// nobody listens. ``AddressFamilies/all`` unless the listener is bound to one family.
    public var addressFamilies: AddressFamilies

    /// A request to advertise (when `port` is set) and browse `serviceType` as `peerName`, on the
    /// address families `addressFamilies`.
    public init(serviceType: String, peerID: String, peerName: String, port: Int?, txtRecord: [String: String], addressFamilies: AddressFamilies = .all) {
        self.serviceType = serviceType
        self.peerID = peerID
        self.peerName = peerName
        self.port = port
        self.txtRecord = txtRecord
        self.addressFamilies = addressFamilies
    }
}

/// A service that discovery found: where a peer can be reached.
public struct DiscoveredService: Sendable, Hashable {
    /// A key that stays the same for one advertised instance while it exists (for Avahi: the
    /// instance name), used to match ``DiscoveryEvent/lost(key:)``.
    public var key: String
    /// The instance name, shown to users as the peer's name until the handshake tells its own.
    public var name: String
    /// The `peerid` TXT value, when the service carries one.
    public var peerID: String?
    /// Addresses to dial, each once; an IPv6 link-local address carries its zone
    /// (`fe80::1%eth0`). The connection layer dials them all, IPv6 first and then alternating
    /// families (Happy Eyeballs, RFC 8305), so their order here does not matter.
    public var endpoints: [PeerEndpoint]
    /// The TXT record as unordered key/value pairs.
    public var txtRecord: [String: String]
    /// Whether the backend is still resolving the service on another interface or IP version, so
    /// that more endpoints may follow within moments (Avahi resolves IPv4 and IPv6 separately).
    /// While it is, a dial whose endpoints all failed waits briefly for them before the service is
    /// reported unreachable. False when the backend knows every endpoint at once.
    public var isResolving: Bool

    /// A service as a discovery backend reports it.
    public init(key: String, name: String, peerID: String?, endpoints: [PeerEndpoint], txtRecord: [String: String], isResolving: Bool = false) {
        self.key = key
        self.name = name
        self.peerID = peerID
        self.endpoints = endpoints
        self.txtRecord = txtRecord
        self.isResolving = isResolving
    }
}

/// What a discovery backend reports.
public enum DiscoveryEvent: Sendable, Hashable {
    /// A service was found or its addresses or TXT record changed.
    case found(DiscoveredService)
    /// The service with this key went away.
    case lost(key: String)
    /// This transceiver is advertised under `name` (which differs from the requested name after a collision).
    case advertised(name: String)
    /// Discovery cannot work right now; the backend keeps trying to recover where it can.
    case failed(PeerKitError)
    /// Discovery works again after a failure.
    case recovered
    /// Every service the backend already knew of when browsing started has been reported (Avahi:
    /// its cache is exhausted and what it listed is resolved). Sent at most once per start;
    /// services that answer later are still reported. A one-shot tool can stop waiting here
    /// instead of guessing how long discovery takes.
    case knownServicesListed
}

/// A host and TCP port at which a peer listens.
public struct PeerEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// A host name or an IPv4 or IPv6 address literal.
    public var host: String
    /// The TCP port.
    public var port: Int

    /// Creates an endpoint from a host and a port.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `"host:port"` or `"[v6-address]:port"`; returns `nil` for anything else.
    public init?(_ string: String) {
        let hostPart: Substring
        let portPart: Substring
        if string.hasPrefix("[") {
            guard let close = string.firstIndex(of: "]"),
                  string[string.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = string[string.index(after: string.startIndex)..<close]
            portPart = string[string.index(close, offsetBy: 2)...]
        } else {
            guard let colon = string.lastIndex(of: ":") else { return nil }
            hostPart = string[..<colon]
            portPart = string[string.index(after: colon)...]
        }
        guard !hostPart.isEmpty, let port = Int(portPart), (1...65535).contains(port) else { return nil }
        self.init(host: String(hostPart), port: port)
    }

    /// `HOST:PORT`; an IPv6 host is written in brackets, as in `[::1]:7000`.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
