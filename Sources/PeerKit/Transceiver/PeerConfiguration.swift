import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOPosix

/// Everything a ``PeerTransceiver`` can be told before it starts.
///
/// ```swift
/// var configuration = PeerConfiguration(serviceType: "listrctl")
/// configuration.peerName = "Kitchen"
/// configuration.discoveryInfo = ["role": "store"]
/// let transceiver = PeerTransceiver(configuration: configuration)
/// ```
public struct PeerConfiguration: Sendable {
    /// How a transceiver finds its peers.
    public enum Discovery: Sendable {
        /// DNS-SD through the local avahi-daemon: advertise `_<serviceType>._tcp` and browse for it.
        case avahi
        /// A fixed list of peers to dial; nothing is advertised.
        case staticPeers([PeerEndpoint])
        /// Your own backend. The closure is called once per start.
        case custom(@Sendable () -> any PeerDiscovery)
        /// No discovery: the transceiver only accepts connections.
        case none
    }

    /// The DNS-SD service type without underscores, e.g. `"listrctl"`. Transceivers only talk to
    /// peers of the same service type.
    public var serviceType: String
    /// The name other peers see. Defaults to the host name.
    public var peerName: String
    /// Key/value pairs advertised in the TXT record and sent in the hello.
    public var discoveryInfo: [String: String]
    /// How peers are found. Defaults to ``Discovery-swift.enum/avahi``.
    public var discovery: Discovery
    /// Whether to listen for connections and advertise them. A command-line client that only
    /// dials (like `listrctl`) sets this to `false`.
    public var advertises: Bool
    /// The address to listen on. Defaults to `"::"`: every interface, IPv6 and IPv4 on one socket
    /// (IPv4 peers arrive as IPv4-mapped addresses), because avahi-daemon resolves peers to both
    /// families and a peer dials whichever it gets. On a host whose kernel has IPv6 disabled, `"::"`
    /// cannot be bound and `"0.0.0.0"` (every IPv4 interface) is used instead, said at debug level.
    ///
    /// `"0.0.0.0"` listens on IPv4 only and `"127.0.0.1"` or `"::1"` on loopback only; a specific
    /// IPv4 or IPv6 address listens on that address only. The service is advertised only on the
    /// families listened on, so that no peer is told an address on which nobody listens.
    public var listenHost: String
    /// The port to listen on; 0 picks a free one.
    public var listenPort: Int
    /// The longest frame accepted from a peer once its handshake completed, in bytes. Defaults
    /// to 16 MiB. A longer frame closes the connection before any of its body is buffered.
    public var maximumFrameLength: Int
    /// The longest frame accepted before the handshake completed, in bytes. Defaults to 64 KiB:
    /// plenty for a `peerkit.hello`, and it keeps a stranger from making us buffer large frames
    /// on connections that never authenticate.
    public var maximumHandshakeFrameLength: Int
    /// How many bytes may wait to be sent to one peer: a bound, not a trigger. Defaults to 32 MiB.
    /// Each queued frame counts its bytes and 256 more, for what it costs in memory beyond them
    /// (its buffer's object, the allocator's rounding, its slot in the queue), so that many
    /// small frames cannot hold far more memory than the limit says. What we queue for one peer
    /// stays within it plus one frame, at every moment:
    /// - `send(_:to:)`, requests and group sends wait while the peer's queue is over 1 MiB (a
    ///   socket-like pace), at most ``slowPeerGracePeriod``;
    /// - while the queue is at this limit, the peer's handlers do not run (no replies are made
    ///   for a peer that does not read them), so its further requests are not read;
    /// - a `broadcast` (which cannot wait) to a peer at this limit disconnects it as too slow.
    ///
    /// Frames held for a peer that switches connections after a tie-break count against it too.
    public var maximumQueuedOutboundBytes: Int
    /// How long a send may wait for a peer to read, and how long a peer may stay over
    /// ``maximumQueuedOutboundBytes``, before it is disconnected as too slow (the send then throws
    /// ``PeerKitError/peerTooSlow(peer:queuedBytes:limit:grace:)``). Defaults to 10 s: long enough
    /// to ride out a burst on a slow link. A peer's queue is looked at on its heartbeat's checks:
    /// on every beat (a whole multiple of ``heartbeatInterval``) at least, and every tick once it
    /// is over the limit. So the period is counted from a check that saw it over, up to about a
    /// heartbeat interval after it went over; what is queued stays within the limit all the same.
    public var slowPeerGracePeriod: Duration
    /// Whether a peer whose link drops is *suspended* rather than disconnected, and what was sent
    /// to it and not acknowledged is resent once it is back (feature `resume`, with peers whose
    /// hello lists it too; see `Documentation/Reliability.md`). Defaults to `true`: a peer killed
    /// or cut off is reported ``PeerEvent/peerSuspended(_:reason:)`` at the peer timeout, and
    /// ``PeerEvent/peerDisconnected(_:reason:)`` when its window ends or it comes back as a new
    /// run of its process; a peer that stops says so (`bye`) and is disconnected at once. Set it
    /// to `false` for the behaviour without sessions: every lost connection is a disconnect.
    public var resumesSessions: Bool
    /// How long a suspended peer's session is kept for it to come back. Defaults to 30 s: a Wi-Fi
    /// roam, a cable re-plugged or a switch rebooting. When it runs out the peer is disconnected
    /// with ``PeerKitError/sessionExpired(peer:window:)``, and what was pending for it throws that.
    public var sessionResumeWindow: Duration
    /// How many bytes of messages, requests and replies sent to one peer may wait for its
    /// acknowledgement (feature `resume`): a bound at every moment (plus one frame), also while the
    /// peer is suspended. Defaults to 8 MiB: a few seconds of a busy stream (10,000 messages of
    /// 400 bytes fit twice), and a quarter of ``maximumQueuedOutboundBytes``, with which it shares
    /// its frames (no copy); a lower ``maximumQueuedOutboundBytes`` lowers it too. Like that
    /// limit, it counts each frame's bytes and 256 more; what is made for the peer alone also
    /// counts against ``maximumTotalQueuedOutboundBytes`` until acknowledged. At the bound, `send(_:to:)` and requests wait for acknowledgements
    /// (at most ``slowPeerGracePeriod``, then the peer is disconnected as too slow); while the peer
    /// is suspended, or for a `broadcast` or a reply, which cannot wait, the peer is disconnected
    /// and the call throws ``PeerKitError/sessionBufferFull(peer:unacknowledgedBytes:limit:)``.
    public var maximumUnacknowledgedBytes: Int
    /// How many bytes of one peer's messages may wait for their handlers. Defaults to 4 MiB.
    /// Over it, PeerKit stops reading from that peer's connection (TCP flow control then slows
    /// the sender) until the handlers have caught up; the peer is not disconnected for it.
    public var maximumQueuedInboundBytes: Int
    /// How many bytes of all peers' messages together may wait for their handlers. Defaults to
    /// 32 MiB (eight peers at their ``maximumQueuedInboundBytes``). A message counts from the end
    /// of the read that brought it to the end of its handler; over the budget, the connection that
    /// went over stops reading (unless that message is the only one it has waiting: peers holding
    /// the budget cannot stop one that sends a request and waits for its answer), and every
    /// connection paused for it resumes once the total is down to half. So many connections, each
    /// within its own limit, cannot together make the process hold more than this, plus, per
    /// connection, the messages of the read that went over. Requests of a peer that disconnected
    /// are dropped unhandled and count no longer.
    public var maximumTotalQueuedInboundBytes: Int
    /// How many bytes may wait to be sent to all peers together: a bound, not a trigger, on top of
    /// each peer's ``maximumQueuedOutboundBytes``. Defaults to 128 MiB (four peers at their limit).
    /// Like that limit, it counts each queued frame's bytes and 256 more for what the frame costs
    /// in memory beyond them. It counts what is made for one peer alone (replies, `send(_:to:)`,
    /// requests), for as long as it is held: until it is written or, with a resumable session
    /// (``resumesSessions``), until the peer acknowledges it, since the session keeps it for a
    /// resend. A `broadcast` is one buffer shared by every peer's queue, bounded by one peer's
    /// limit, and does not count, except while a peer switches to the connection that won a
    /// tie-break: what is held for it then counts until it moves to that connection. While the
    /// queues together hold this much:
    /// - a peer's handlers run only while nothing counted waits to be sent to it or to be
    ///   acknowledged by it, so peers that do not read (or acknowledge) their replies cannot make
    ///   more of them (the others' requests are still answered, one at a time as their replies
    ///   leave or are acknowledged);
    /// - a peer that holds 1 MiB or more of it all through ``slowPeerGracePeriod`` is disconnected
    ///   as too slow, so that peers which never read cannot keep the budget spent.
    ///
    /// So many connections, each within its own limit, cannot together make the process queue
    /// more than this (plus one frame per connection).
    public var maximumTotalQueuedOutboundBytes: Int
    /// The longest chunk of a resource (``PeerTransceiver/send(resource:named:to:)``) in one
    /// frame, in bytes. Defaults to 256 KiB: a message or request queued during a large transfer
    /// waits for at most one chunk (0.3 ms at 1 GB/s, 60 ms on a 4 MiB/s link), while chunks stay
    /// large enough that framing costs nothing measurable. As a receiver, this peer announces the
    /// smaller of this and its ``maximumFrameLength``; the sender uses the smaller of both sides'.
    public var resourceChunkLength: Int
    /// How many bytes of one incoming resource may be in flight ahead of what its handler has
    /// read, in bytes. Defaults to 4 MiB: enough to keep a fast link busy (the sender waits for
    /// acknowledgements only when it is this far ahead), and the memory one incoming transfer
    /// may cost. A sender that goes beyond the window it was granted is disconnected.
    public var resourceWindowBytes: Int
    /// How many resources may be arriving at once, from all peers together. Defaults to 4, so
    /// incoming transfers buffer at most 4 × ``resourceWindowBytes`` (16 MiB). Further offers are
    /// refused with a sentence saying so; the sender's transfer throws
    /// ``PeerKitError/resourceRefused(name:peer:reason:)``.
    public var maximumConcurrentIncomingResources: Int
    /// How many of those may come from one peer. Defaults to 2, half of
    /// ``maximumConcurrentIncomingResources``, so one peer cannot take every slot. A peer is
    /// counted by what it cannot choose, because a peer ID is anyone's to claim in plaintext or
    /// with a shared key: in certificates mode its certificate, over all its connections;
    /// otherwise its connection. And whatever this is set to, one address (an IPv6 address by
    /// its /64 prefix) never holds every slot: all its connections together hold at most one
    /// fewer than ``maximumConcurrentIncomingResources``. Further offers are refused with a
    /// sentence saying which limit they met.
    public var maximumConcurrentIncomingResourcesPerPeer: Int
    /// The largest resource accepted, in bytes, when its sender announces its size; a resource of
    /// unannounced size is stopped when it goes over. Defaults to 16 GiB: a bound on the disk a
    /// peer can make a handler that writes files fill, far above what PeerKit's users send.
    public var maximumIncomingResourceBytes: Int64
    /// How long a resource transfer may wait on its peer without progress before it is
    /// cancelled, both sides told why: an incoming one for bytes its window has room for, an
    /// outgoing one for the receiver's acceptance or for acknowledgements of the bytes sent.
    /// Waiting on this side's own handler or source does not count, nor on the receiver's handler
    /// once every byte was acknowledged, and the peer stays connected. A transfer is looked at
    /// when this much has passed since its last progress, or since it was last looked at while
    /// not waiting, so a stall is noticed within twice this. Defaults
    /// to 30 s: hundreds of times what a chunk takes on a 4 MiB/s link, and a bound on how long a
    /// peer that offers resources and then sends nothing can hold the slots of
    /// ``maximumConcurrentIncomingResources`` (and a sender's source, such as a database snapshot).
    public var resourceStallTimeout: Duration
    /// How many connections may be open at once, handshaking or established. Defaults to 512.
    /// Further incoming connections are closed at once, with one log line per episode.
    public var maximumConnections: Int
    /// How many incoming connections may be in their handshake at once. Defaults to 64. When all
    /// are taken, a new connection is not refused: the oldest pending handshake of the address
    /// with the most pending ones is closed to make room for it (one log line per episode), so
    /// strangers that connect and say nothing cannot lock real peers out (see
    /// ``maximumPendingHandshakesPerAddress``). Only a connection from an address that holds
    /// as many pending handshakes as the busiest one is closed at once instead: making room for
    /// it would only swap one of that address's handshakes for another.
    public var maximumPendingHandshakes: Int
    /// How many incoming connections from one address (an IPv6 address counts by its /64 prefix)
    /// may be in their handshake at once. Defaults to 8: a peer has one connection in its
    /// handshake to us at a time (two when both dial at once), so 8 leaves room for several
    /// programs behind one address, while a stranger with one address holds at most 8 of the
    /// ``maximumPendingHandshakes`` slots, and can never be the reason a client from another
    /// address is evicted. Further connections from that address are closed at once, with one
    /// log line per episode.
    public var maximumPendingHandshakesPerAddress: Int
    /// How long an incoming connection may take to send its first bytes, which tell TLS from
    /// plaintext; after them ``handshakeTimeout`` applies. Defaults to 2 s: a client sends its
    /// first bytes (a TLS ClientHello or its hello) as soon as it is connected, so they arrive one
    /// round trip after the connection was accepted; 2 s is twenty times a slow Wi-Fi round trip
    /// and leaves room for a client on a loaded machine, while a stranger that connects and says
    /// nothing holds a handshake slot for 2 s instead of the 5 s of the handshake.
    public var preHandshakeTimeout: Duration
    /// How long a connection may be silent before it is pinged. Defaults to 1.25 s, half the
    /// ``peerTimeout``: an idle link then carries one ping and one pong every 1.25 s, and a pong
    /// has 1.25 s to come back before the peer counts as gone. Anything the peer sends counts, and
    /// a ping it sends answers ours, so a busy link or one pinged from the other end sends none.
    /// On an idle link the side that dialled pings, on a *beat*: a whole multiple of this interval
    /// on the machine's monotonic clock, so that every idle link of a machine pings at the same
    /// instant (heartbeat ticks come every tenth of ``peerTimeout``, at most every half interval,
    /// and an event loop wakes only at those where one of its connections has something due). The
    /// other side pings only a beat later, should that ping not come.
    public var heartbeatInterval: Duration
    /// How long a peer may stay silent before it is disconnected. Any bytes from it count, so a
    /// peer in the middle of sending a large frame is never silent. Defaults to 2.5 s.
    public var peerTimeout: Duration
    /// How long a new connection may take to complete the handshake. Defaults to 5 s. A redial of
    /// a peer whose session is suspended (``resumesSessions``) waits three times as long for the
    /// peer's hello: the peer is known and accepted the connection, so a late hello means a loaded
    /// machine, and starting over would only load it more while the session's window runs. A
    /// suspended peer that dials us too, and that closed our dial because our hello reached it
    /// late, is redialled only after four times this plus 0.5 s, so that its own dial, which
    /// waits for our hello, gets through first.
    public var handshakeTimeout: Duration
    /// How long a TCP connect may take. Defaults to 1 s, so that a peer whose link comes back is
    /// redialled quickly rather than behind a long SYN retry.
    public var connectTimeout: Duration
    /// The back-off between attempts to reach a peer that cannot be reached: 0.5 s, doubling
    /// up to 30 s, with jitter. A new advertisement of the peer resets it.
    public var reconnectBackoff: Backoff
    /// The longest group name, in UTF-8 bytes. Defaults to 128: room for any readable name, and
    /// with ``maximumGroupsPerPeer`` it bounds what a peer's membership costs us (64 × 128 bytes,
    /// 8 KiB per peer). A name over it is refused by ``PeerTransceiver/join(_:)``, and a peer that
    /// announces one is disconnected. Give every peer of a service type the same limits.
    public var maximumGroupNameLength: Int
    /// How many groups one peer may be in. Defaults to 64. ``PeerTransceiver/join(_:)`` refuses a
    /// group over it, and a peer that announces more is disconnected with a sentence in the log.
    public var maximumGroupsPerPeer: Int
    /// How connections are protected: ``PeerSecurity/none`` (plaintext, the default) or
    /// ``PeerSecurity/preSharedKey(_:)``. One line turns on TLS:
    /// `configuration.security = .preSharedKey(try PeerKey(contentsOfFile: path))`.
    public var security: PeerSecurity
    /// Decides, for each peer whose handshake succeeded, whether to keep its connection: return
    /// `false` to close it before any of its messages is delivered. The default admits every peer
    /// (with security on, every peer that proved it holds the key). Like MultipeerConnectivity's
    /// invitation handler.
    public var admission: PeerAdmission?
    /// Where PeerKit logs.
    public var logger: Logger
    /// Where PeerKit's metrics go (`peerkit_…` counters, gauges and a timer; see
    /// Documentation/Metrics.md). Defaults to `nil`: the factory bootstrapped with swift-metrics'
    /// `MetricsSystem` when the transceiver is created (which records nothing unless the program
    /// bootstrapped one). Set it to keep one transceiver's metrics apart, as tests do.
    public var metricsFactory: (any MetricsFactory)?
    /// The event loops that run the sockets. Defaults to NIO's shared singleton group.
    public var eventLoopGroup: any EventLoopGroup
    /// Where message handlers run. nil (the default): on Swift's global concurrent executor,
    /// off the event loops, so that a handler that blocks or runs for seconds holds up no
    /// connection and no heartbeat.
    ///
    /// An ``EventLoopTaskExecutor`` over the one loop of ``eventLoopGroup`` runs handlers where
    /// the messages are read, and writes their replies without waking another thread: a
    /// request/reply costs two thread wake-ups fewer on the answering side. The price is that a
    /// handler that blocks holds up every connection of that loop, and one that blocks longer
    /// than the peers' ``peerTimeout`` gets this transceiver disconnected from them all. See
    /// ``EventLoopTaskExecutor``.
    public var handlerExecutor: (any TaskExecutor)?
    /// The clock every PeerKit timer reads: heartbeats and peer expiry, the handshake and connect
    /// timeouts, reconnect back-off, request timeouts, ``PeerTransceiver/waitForPeer(timeout:where:)``,
    /// the admission timeout, the tie-break grace period and the deadlines for closing a
    /// connection. Defaults to `ContinuousClock()`, whose timers are the event loops' own.
    ///
    /// Tests pass a clock they advance by hand (swift-clocks' `TestClock`, or the `NetworkClock`
    /// of a `PeerKitTesting` test network), so that a peer timeout of 2.5 s takes no time at
    /// all. Avahi's own timers (its name-collision and reconnection delays) run on Avahi's poll
    /// loop and are not affected.
    public var clock: any Clock<Duration>
    /// Where connections come from when they are not TCP sockets: `PeerKitTesting`'s
    /// in-memory `TestNetwork`. nil (the default) listens and dials over TCP.
    package var transport: (any PeerTransport)?

    /// Creates a configuration with the defaults for everything but the service type.
    public init(serviceType: String) {
        self.serviceType = serviceType
        self.peerName = PeerConfiguration.defaultPeerName
        self.discoveryInfo = [:]
        self.discovery = .avahi
        self.advertises = true
        self.listenHost = "::"
        self.listenPort = 0
        self.maximumFrameLength = 16 * 1024 * 1024
        self.maximumHandshakeFrameLength = 64 * 1024
        self.maximumQueuedOutboundBytes = 32 * 1024 * 1024
        self.slowPeerGracePeriod = .seconds(10)
        self.resumesSessions = true
        self.sessionResumeWindow = .seconds(30)
        self.maximumUnacknowledgedBytes = 8 * 1024 * 1024
        self.maximumQueuedInboundBytes = 4 * 1024 * 1024
        self.maximumTotalQueuedInboundBytes = 32 * 1024 * 1024
        self.maximumTotalQueuedOutboundBytes = 128 * 1024 * 1024
        self.resourceChunkLength = 256 * 1024
        self.resourceWindowBytes = 4 * 1024 * 1024
        self.maximumConcurrentIncomingResources = 4
        self.maximumConcurrentIncomingResourcesPerPeer = 2
        self.resourceStallTimeout = .seconds(30)
        self.maximumIncomingResourceBytes = 16 * 1024 * 1024 * 1024
        self.maximumConnections = 512
        self.maximumPendingHandshakes = 64
        self.maximumPendingHandshakesPerAddress = 8
        self.preHandshakeTimeout = .seconds(2)
        self.heartbeatInterval = .milliseconds(1250)
        self.peerTimeout = .milliseconds(2500)
        self.handshakeTimeout = .seconds(5)
        self.connectTimeout = .seconds(1)
        self.reconnectBackoff = Backoff()
        self.maximumGroupNameLength = 128
        self.maximumGroupsPerPeer = 64
        self.security = .none
        self.admission = nil
        self.logger = Logger(label: "PeerKit")
        self.metricsFactory = nil
        self.eventLoopGroup = MultiThreadedEventLoopGroup.singleton
        self.handlerExecutor = nil
        self.clock = ContinuousClock()
        self.transport = nil
    }

    /// The host name, as the default peer name.
    public static var defaultPeerName: String {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty ? "PeerKit peer" : name
    }

    /// The longest peer name, in UTF-8 bytes: a DNS-SD instance name is one DNS label.
    public static let maximumPeerNameLength = 63

    /// Checks the service type, peer name, discovery info and limits; throws the first problem found.
    public func validate() throws(PeerKitError) {
        try ServiceType.validate(serviceType)
        if peerName.isEmpty {
            throw PeerKitError.invalidPeerName(peerName, reason: "it is empty")
        }
        if peerName.utf8.count > Self.maximumPeerNameLength {
            throw PeerKitError.invalidPeerName(peerName, reason: "it is \(peerName.utf8.count) bytes long in UTF-8, and a DNS-SD instance name is at most \(Self.maximumPeerNameLength)")
        }
        let limits: [(String, Int)] = [
            ("maximumFrameLength", maximumFrameLength), ("maximumHandshakeFrameLength", maximumHandshakeFrameLength),
            ("maximumQueuedOutboundBytes", maximumQueuedOutboundBytes), ("maximumQueuedInboundBytes", maximumQueuedInboundBytes),
            ("maximumTotalQueuedInboundBytes", maximumTotalQueuedInboundBytes), ("maximumTotalQueuedOutboundBytes", maximumTotalQueuedOutboundBytes),
            ("maximumUnacknowledgedBytes", maximumUnacknowledgedBytes),
            ("maximumConnections", maximumConnections), ("maximumPendingHandshakes", maximumPendingHandshakes),
            ("maximumPendingHandshakesPerAddress", maximumPendingHandshakesPerAddress),
            ("maximumGroupNameLength", maximumGroupNameLength), ("maximumGroupsPerPeer", maximumGroupsPerPeer),
            ("resourceChunkLength", resourceChunkLength), ("resourceWindowBytes", resourceWindowBytes),
            ("maximumConcurrentIncomingResources", maximumConcurrentIncomingResources),
            ("maximumConcurrentIncomingResourcesPerPeer", maximumConcurrentIncomingResourcesPerPeer),
        ]
        for (name, value) in limits where value <= 0 {
            throw PeerKitError.invalidConfiguration(property: name, reason: "it is \(value), and it must be at least 1")
        }
        if maximumFrameLength > Int(UInt32.max) {
            throw PeerKitError.invalidConfiguration(property: "maximumFrameLength", reason: "it is \(maximumFrameLength), over the \(UInt32.max) bytes a frame's length field can express")
        }
        if preHandshakeTimeout <= .zero {
            throw PeerKitError.invalidConfiguration(property: "preHandshakeTimeout", reason: "it is \(preHandshakeTimeout), and it must be longer than zero")
        }
        if sessionResumeWindow <= .zero {
            throw PeerKitError.invalidConfiguration(property: "sessionResumeWindow", reason: "it is \(sessionResumeWindow), and it must be longer than zero (set resumesSessions to false to turn sessions off)")
        }
        if resourceStallTimeout <= .zero {
            throw PeerKitError.invalidConfiguration(property: "resourceStallTimeout", reason: "it is \(resourceStallTimeout), and it must be longer than zero")
        }
        if maximumIncomingResourceBytes < 0 {
            throw PeerKitError.invalidConfiguration(property: "maximumIncomingResourceBytes", reason: "it is \(maximumIncomingResourceBytes), and it must be at least 0")
        }
        for (key, value) in discoveryInfo {
            try ServiceType.validateTXTPair(key: key, value: value)
        }
    }
}

/// Exponential back-off with jitter and a cap, used when reconnecting to a lost peer.
public struct Backoff: Sendable, Hashable {
    /// The delay before the first retry.
    public var initial: Duration
    /// The longest delay between retries.
    public var maximum: Duration
    /// Each delay is the previous one times this factor (before jitter).
    public var multiplier: Double
    /// The fraction of each delay that is randomised, from 0 (none) to 1.
    public var jitter: Double

    /// Creates a back-off policy. The defaults retry after about 0.5 s, then double up to 30 s,
    /// each delay randomised by ±20 % so that peers that lost each other at the same moment do
    /// not redial in lock-step.
    public init(initial: Duration = .milliseconds(500), maximum: Duration = .seconds(30), multiplier: Double = 2, jitter: Double = 0.2) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The delay before retry number `attempt` (0-based), with `random` in 0..<1 choosing the jitter.
    public func delay(attempt: Int, random: Double) -> Duration {
        let base = initial.seconds * pow(multiplier, Double(min(attempt, 30)))
        let capped = min(base, maximum.seconds)
        let jittered = capped * (1 - jitter + jitter * 2 * random)
        return .nanoseconds(Int64(min(jittered, maximum.seconds * (1 + jitter)) * 1e9))
    }
}

extension Duration {
    /// The duration as a `Double` number of seconds.
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// The duration as a NIO `TimeAmount`, clamped to what one holds (about 292 years either
    /// way): a user's "wait forever" (`.seconds(.max)`) is a very long wait, not a crash.
    var timeAmount: TimeAmount {
        .nanoseconds(nanosecondsClamped)
    }
}
