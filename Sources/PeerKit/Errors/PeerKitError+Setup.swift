// Codes about setting a transceiver up and running it: its configuration, listening, discovery.
// To add a code, see "Adding a code" in PeerKitError.swift.

extension PeerKitError.Code {
    /// The service type is not a valid DNS-SD service name (RFC 6335).
    public static let invalidServiceType = Self("invalidServiceType")
    /// A `discoveryInfo` pair cannot be carried in a DNS-SD TXT record.
    public static let invalidDiscoveryInfo = Self("invalidDiscoveryInfo")
    /// The peer name cannot be advertised (empty, or longer than a DNS-SD instance name).
    public static let invalidPeerName = Self("invalidPeerName")
    /// A ``PeerConfiguration`` property has a value the transceiver cannot work with.
    public static let invalidConfiguration = Self("invalidConfiguration")
    /// The transceiver could not listen for connections.
    public static let listenFailed = Self("listenFailed")
    /// Discovery cannot work right now (for example, avahi-daemon is not reachable).
    public static let discoveryUnavailable = Self("discoveryUnavailable")
    /// No peer of the service type was connected within the timeout.
    public static let noPeerFound = Self("noPeerFound")
    /// The transceiver is not running.
    public static let notRunning = Self("notRunning")
    /// ``PeerTransceiver/run()`` was called while the transceiver runs already.
    public static let alreadyRunning = Self("alreadyRunning")
}

extension PeerKitError {
    /// The service type is not a valid DNS-SD service name (RFC 6335).
    public static func invalidServiceType(_ serviceType: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidServiceType, ["serviceType": .text(serviceType), "reason": .text(reason)],
                     "The service type \"\(serviceType)\" is not a valid DNS-SD service name: \(reason). Use 1 to 15 lowercase letters, digits and hyphens, with at least one letter, for example \"listrctl\".")
    }

    /// A `discoveryInfo` pair cannot be carried in a DNS-SD TXT record.
    public static func invalidDiscoveryInfo(key: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidDiscoveryInfo, ["key": .text(key), "reason": .text(reason)],
                     "The discovery info entry \"\(key)\" cannot be advertised: \(reason).")
    }

    /// The peer name cannot be advertised (empty, or longer than a DNS-SD instance name).
    public static func invalidPeerName(_ name: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidPeerName, ["name": .text(name), "reason": .text(reason)],
                     "The peer name \"\(LogSafe.text(name, maximumBytes: 80))\" cannot be used: \(reason). Set PeerConfiguration.peerName to 1 to \(PeerConfiguration.maximumPeerNameLength) bytes of UTF-8.")
    }

    /// A ``PeerConfiguration`` property has a value the transceiver cannot work with.
    public static func invalidConfiguration(property: String, reason: String) -> PeerKitError {
        PeerKitError(.invalidConfiguration, ["property": .text(property), "reason": .text(reason)],
                     "PeerConfiguration.\(property) cannot be used: \(reason).")
    }

    /// The transceiver could not listen for connections.
    public static func listenFailed(address: String, reason: String) -> PeerKitError {
        PeerKitError(.listenFailed, ["address": .text(address), "reason": .text(reason)],
                     "PeerKit could not listen on \(address): \(reason). Choose another port or address in PeerConfiguration.")
    }

    /// Discovery cannot work right now (for example, avahi-daemon is not reachable).
    public static func discoveryUnavailable(serviceType: String, reason: String) -> PeerKitError {
        PeerKitError(.discoveryUnavailable, ["serviceType": .text(serviceType), "reason": .text(reason)],
                     "Peers of service type \"\(serviceType)\" cannot be discovered: \(reason). Start avahi-daemon (and the D-Bus system bus it needs), or configure static peers with PeerConfiguration.discovery = .staticPeers([...]).")
    }

    /// No peer of the service type was connected within the timeout.
    public static func noPeerFound(serviceType: String, timeout: Duration) -> PeerKitError {
        PeerKitError(.noPeerFound, ["serviceType": .text(serviceType), "timeout": .duration(timeout)],
                     "No peer of service type \"\(serviceType)\" connected within \(timeout.peerKitSeconds). Check that a peer is running and advertising that service type, and that avahi-daemon is running.")
    }

    /// The transceiver is not running.
    public static let notRunning = PeerKitError(.notRunning, [:], "The transceiver is not running; call resume() before sending.")

    /// ``PeerTransceiver/run()`` was called while the transceiver runs already.
    public static let alreadyRunning = PeerKitError(.alreadyRunning, [:], "The transceiver is already running; run() it from one place only, or stop() it before running it again.")

    /// The `key` the sentence names, for the codes that have one (`invalidDiscoveryInfo`); nil for the others.
    public var key: String? { text("key") }

    /// The `property` the sentence names, for the codes that have one (`invalidConfiguration`); nil for the others.
    public var property: String? { text("property") }

    /// The `address` the sentence names, for the codes that have one (`listenFailed`); nil for the others.
    public var address: String? { text("address") }
}
