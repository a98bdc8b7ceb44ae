import CoreMetrics
import NIOConcurrencyHelpers

/// The swift-metrics instruments of one transceiver, made once so that the hot path only
/// increments objects that already exist: no dimension arrays, no string formatting per message.
///
/// Every name starts with `peerkit_`; Documentation/Metrics.md lists them with their dimensions.
/// PeerKit depends on the swift-metrics API only: the metrics go to
/// ``PeerConfiguration/metricsFactory``, or to the factory bootstrapped with `MetricsSystem`.
///
/// **Bounded cardinality.** A peer can send any type key, so a received key is counted under a
/// label of its own only when this side uses the key itself: it registered a handler for it, or
/// sent a message of it. Every other received key is counted under ``otherTypeLabel``. At most
/// ``maximumTypeLabels`` keys get labels of their own; keys beyond that are counted under
/// ``otherTypeLabel`` too.
final class PeerMetrics: Sendable {
    /// The label of message metrics for type keys that have no label of their own.
    static let otherTypeLabel = "other"
    /// At most this many type keys get a label of their own (per transceiver).
    static let maximumTypeLabels = 100

    /// Where a connection is in its life, for the `peerkit_connections` gauge.
    enum ConnectionState: CaseIterable {
        case handshaking, open, closing

        var label: String {
            switch self {
            case .handshaking: "handshaking"
            case .open: "open"
            case .closing: "closing"
            }
        }
    }

    /// Why an incoming connection (or a peer) was refused, for `peerkit_connections_refused_total`.
    enum Refusal: CaseIterable {
        /// ``PeerConfiguration/maximumConnections`` was reached.
        case connectionLimit
        /// ``PeerConfiguration/maximumPendingHandshakes`` was reached.
        case handshakeLimit
        /// The TLS handshake failed: another key, another security mode.
        case security
        /// The admission hook said no.
        case admission

        var label: String {
            switch self {
            case .connectionLimit: "connection_limit"
            case .handshakeLimit: "handshake_limit"
            case .security: "security"
            case .admission: "admission"
            }
        }
    }

    /// Why a connection ended other than in order, for `peerkit_connections_dropped_total`.
    enum Drop: CaseIterable {
        case handshakeFailed, malformed, frameTooLarge, timedOut, tooSlow, limitExceeded, peerError, connectionLost, transportError

        var label: String {
            switch self {
            case .handshakeFailed: "handshake_failed"
            case .malformed: "malformed"
            case .frameTooLarge: "frame_too_large"
            case .timedOut: "timed_out"
            case .tooSlow: "too_slow"
            case .limitExceeded: "limit_exceeded"
            case .peerError: "peer_error"
            case .connectionLost: "connection_lost"
            case .transportError: "transport_error"
            }
        }
    }

    /// The message counters of one type key (or of ``PeerMetrics/otherTypeLabel``).
    final class TypeMetrics: Sendable {
        let messagesReceived: Counter
        let bytesReceived: Counter
        let messagesSent: Counter
        let bytesSent: Counter

        init(label: String, factory: any MetricsFactory) {
            let dimensions = [("type", label)]
            messagesReceived = Counter(label: "peerkit_messages_received_total", dimensions: dimensions, factory: factory)
            bytesReceived = Counter(label: "peerkit_message_bytes_received_total", dimensions: dimensions, factory: factory)
            messagesSent = Counter(label: "peerkit_messages_sent_total", dimensions: dimensions, factory: factory)
            bytesSent = Counter(label: "peerkit_message_bytes_sent_total", dimensions: dimensions, factory: factory)
        }

        /// Counts `count` messages of `payloadBytes` each, sent.
        func sent(payloadBytes: Int, count: Int = 1) {
            messagesSent.increment(by: count)
            bytesSent.increment(by: payloadBytes * count)
        }

        /// Counts one message of `payloadBytes`, received.
        func received(payloadBytes: Int) {
            messagesReceived.increment()
            bytesReceived.increment(by: payloadBytes)
        }
    }

    private let factory: any MetricsFactory
    private let connectionMeters: [Meter]
    private let refusedCounters: [Counter]
    private let droppedCounters: [Counter]
    /// Incoming connections that passed the connection limits.
    let accepted: Counter
    /// Outgoing connections whose TCP connect succeeded.
    let dialled: Counter
    /// Outgoing TCP connects that failed (each address tried counts once).
    let dialFailures: Counter
    /// Bytes of PeerKit frames read from peers, length prefix included (before TLS decryption).
    let wireBytesReceived: Counter
    /// Bytes of PeerKit frames written to peers, length prefix included (before TLS encryption).
    let wireBytesSent: Counter
    /// Bytes of frames waiting in the send queues of all connections.
    let sendQueueBytes: Meter
    /// Bytes of received messages waiting for their handlers, over all connections.
    let receiveQueueBytes: Meter
    /// From sending a request to its reply (an error reply included).
    let requestDuration: Timer
    /// Requests that got no reply within their timeout.
    let requestsTimedOut: Counter
    /// Counters for type keys without a label of their own.
    let otherType: TypeMetrics
    private struct TypeLabels {
        var labelled: [String: TypeMetrics] = [:]
        /// Keys whose counters are being made.
        var reserved: Set<String> = []
    }
    private let types = NIOLockedValueBox(TypeLabels())
    /// Whether the factory is swift-metrics' no-op one (nothing bootstrapped, nothing
    /// configured): then a type key's counters are ``otherType``'s, which record nothing either,
    /// and no message pays for looking its key up.
    private let recordsNothing: Bool

    /// Metrics that go to `factory`, or to `MetricsSystem.factory` when it is nil.
    init(factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        self.factory = factory
        recordsNothing = factory is NOOPMetricsHandler
        connectionMeters = ConnectionState.allCases.map {
            Meter(label: "peerkit_connections", dimensions: [("state", $0.label)], factory: factory)
        }
        refusedCounters = Refusal.allCases.map {
            Counter(label: "peerkit_connections_refused_total", dimensions: [("reason", $0.label)], factory: factory)
        }
        droppedCounters = Drop.allCases.map {
            Counter(label: "peerkit_connections_dropped_total", dimensions: [("reason", $0.label)], factory: factory)
        }
        accepted = Counter(label: "peerkit_connections_accepted_total", factory: factory)
        dialled = Counter(label: "peerkit_connections_dialled_total", factory: factory)
        dialFailures = Counter(label: "peerkit_dial_failures_total", factory: factory)
        wireBytesReceived = Counter(label: "peerkit_wire_bytes_received_total", factory: factory)
        wireBytesSent = Counter(label: "peerkit_wire_bytes_sent_total", factory: factory)
        sendQueueBytes = Meter(label: "peerkit_send_queue_bytes", factory: factory)
        receiveQueueBytes = Meter(label: "peerkit_receive_queue_bytes", factory: factory)
        requestDuration = Timer(label: "peerkit_request_duration_seconds", factory: factory)
        requestsTimedOut = Counter(label: "peerkit_requests_timed_out_total", factory: factory)
        otherType = TypeMetrics(label: Self.otherTypeLabel, factory: factory)
    }

    /// Metrics that go nowhere, for connections made outside a transceiver (tests).
    static let disabled = PeerMetrics(factory: NOOPMetricsHandler.instance)

    /// The gauge of connections in `state`.
    func connections(_ state: ConnectionState) -> Meter {
        switch state {
        case .handshaking: connectionMeters[0]
        case .open: connectionMeters[1]
        case .closing: connectionMeters[2]
        }
    }

    /// Counts a refused connection.
    func refused(_ refusal: Refusal) {
        let index = Refusal.allCases.firstIndex(of: refusal) ?? 0
        refusedCounters[index].increment()
    }

    /// Counts a dropped connection.
    func dropped(_ drop: Drop) {
        let index = Drop.allCases.firstIndex(of: drop) ?? 0
        droppedCounters[index].increment()
    }

    /// The counters of a type key this side uses (registers a handler for, or sends): made on
    /// first use while fewer than ``maximumTypeLabels`` keys have labels, else ``otherType``.
    func usedType(_ key: String) -> TypeMetrics {
        if recordsNothing { return otherType }
        enum Lookup { case found(TypeMetrics), make, full }
        let lookup = types.withLockedValue { types -> Lookup in
            if let existing = types.labelled[key] { return .found(existing) }
            guard types.labelled.count + types.reserved.count < Self.maximumTypeLabels else { return .full }
            // Reserved, so that keys made at the same time cannot take more than the maximum.
            return types.reserved.insert(key).inserted ? .make : .full
        }
        switch lookup {
        case let .found(existing):
            return existing
        case .full:
            // Another thread may be making this very key; until it is done, count it as other.
            return types.withLockedValue { $0.labelled[key] } ?? otherType
        case .make:
            // Made outside the lock: the factory is someone else's code.
            let made = TypeMetrics(label: key, factory: factory)
            types.withLockedValue { types in
                types.reserved.remove(key)
                types.labelled[key] = made
            }
            return made
        }
    }

    /// The counters of a type key a peer sent: its own when this side uses the key, else ``otherType``.
    func receivedType(_ key: String) -> TypeMetrics {
        if recordsNothing { return otherType }
        return types.withLockedValue { $0.labelled[key] } ?? otherType
    }
}
