/// The payload of `peerkit.hello`, the first frame each side sends on a new connection.
///
///     {"protocol":1,"peerID":"5F0C…","name":"Kitchen","serviceType":"listrctl","discoveryInfo":{"role":"store"},"features":["groups"]}
///
/// Unknown keys are ignored, so later versions can add fields without breaking version 1 peers.
/// New wire features are negotiated rather than versioned: `features` lists the optional parts of
/// the protocol the sender speaks (absent means none), and a peer sends a feature's frames only to
/// peers that list it.
struct Hello: Codable, Sendable, Hashable {
    /// The wire-protocol version this implementation speaks.
    static let currentProtocol = 1

    /// The optional protocol features this implementation speaks, sent in every hello.
    static let supportedFeatures: [String] = [Feature.groups, Feature.resources]

    /// Names of the optional protocol features (lowercase, as on the wire).
    enum Feature {
        /// Named groups: `peerkit.groups` frames and the envelope's `group` key.
        static let groups = "groups"
        /// Large transfers in chunks: `peerkit.resource.*` frames and binary chunk frames.
        static let resources = "resources"
        /// Resumable sessions: `peerkit.resume`, `peerkit.resend` and `peerkit.ack` frames, and
        /// the hello's `session` (see ``SessionFrame``). Not in ``supportedFeatures``: the
        /// connection manager adds it when ``PeerConfiguration/resumesSessions`` is on.
        static let resume = "resume"
    }

    /// The longest `session` a hello may carry; a longer (or empty) one means no resume.
    static let maximumSessionLength = 64

    var `protocol`: Int
    var peerID: String
    var name: String
    var serviceType: String
    var discoveryInfo: [String: String]?
    /// The optional features the sender speaks (``Feature``); nil (absent) means none. A feature
    /// is used on a connection only when both hellos list it.
    var features: [String]?
    /// Feature `resume`: this run of the sender (random, new at every start): a peer that comes
    /// back with another one restarted, and its session is new.
    var session: String?

    init(peerID: String, name: String, serviceType: String, discoveryInfo: [String: String]?, features: [String]? = nil, session: String? = nil) {
        self.protocol = Hello.currentProtocol
        self.peerID = peerID
        self.name = name
        self.serviceType = serviceType
        self.discoveryInfo = discoveryInfo
        self.features = features
        self.session = session
    }

    /// The sender's session, when it listed `resume` and sent a usable one (1 to
    /// ``maximumSessionLength`` bytes).
    var resumableSession: String? {
        guard supports(Feature.resume), let session, !session.isEmpty, session.utf8.count <= Self.maximumSessionLength else { return nil }
        return session
    }

    /// Whether the sender listed `feature`.
    func supports(_ feature: String) -> Bool {
        features?.contains(feature) ?? false
    }

    private enum CodingKeys: String, CodingKey {
        case `protocol`, peerID, name, serviceType, discoveryInfo, features, session
    }

    /// A member name of `discoveryInfo`.
    private struct InfoKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Writes the keys in the order `Documentation/Protocol.md` shows, `discoveryInfo` sorted by
    /// key, and leaves out what is absent (nil), so that a decoded hello encodes to what it was.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.protocol, forKey: .protocol)
        try container.encode(peerID, forKey: .peerID)
        try container.encode(name, forKey: .name)
        try container.encode(serviceType, forKey: .serviceType)
        if let discoveryInfo {
            var info = container.nestedContainer(keyedBy: InfoKey.self, forKey: .discoveryInfo)
            for key in discoveryInfo.keys.sorted() {
                try info.encode(discoveryInfo[key] ?? "", forKey: InfoKey(stringValue: key))
            }
        }
        try container.encodeIfPresent(features, forKey: .features)
        try container.encodeIfPresent(session, forKey: .session)
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

/// The empty payload `{}` of `peerkit.ping` and `peerkit.pong`.
struct EmptyPayload: Codable, Sendable, Hashable {}
