/// The payload of `peerkit.hello`, the first frame each side sends on a new connection.
///
///     {"protocol":1,"peerID":"5F0C…","name":"Kitchen","serviceType":"listrctl","discoveryInfo":{"role":"store"}}
///
/// Unknown keys are ignored, so later versions can add fields (such as an authentication
/// challenge) without breaking version 1 peers.
struct Hello: Codable, Sendable, Hashable {
    /// The wire-protocol version this implementation speaks.
    static let currentProtocol = 1

    var `protocol`: Int
    var peerID: String
    var name: String
    var serviceType: String
    var discoveryInfo: [String: String]?
    /// The optional protocol features the sender takes part in (``Feature``); absent means none.
    /// A feature is used on a connection only when both hellos list it.
    var features: [String]?

    init(peerID: String, name: String, serviceType: String, discoveryInfo: [String: String]?, features: [String]? = nil) {
        self.protocol = Hello.currentProtocol
        self.peerID = peerID
        self.name = name
        self.serviceType = serviceType
        self.discoveryInfo = discoveryInfo
        self.features = features
    }

    /// Whether the sender listed `feature`.
    func supports(_ feature: String) -> Bool {
        features?.contains(feature) ?? false
    }

    /// The names of optional protocol features (Documentation/Protocol.md, "Features").
    enum Feature {
        /// Large transfers in chunks: `peerkit.resource.*` frames and binary chunk frames.
        static let resources = "resources"
    }
}

/// The payload of `peerkit.bye`; `reason` is optional.
struct Bye: Codable, Sendable, Hashable {
    /// The reason a connection that duplicates another one is closed.
    static let duplicateConnection = "duplicate connection"

    var reason: String?
}

/// The payload of `peerkit.error`.
struct ErrorPayload: Codable, Sendable, Hashable {
    var reason: String
}

/// The payload of `peerkit.rename`: the sender's advertised name changed (a DNS-SD name
/// collision renamed it), so peers already connected show the name they can find.
struct Rename: Codable, Sendable, Hashable {
    var name: String
}
