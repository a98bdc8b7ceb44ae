import Foundation
import NIOCore
import NIOFoundationCompat

/// The protocol logic of one connection: handshake, keepalive and close, as a value type.
///
/// The channel handler feeds it events (`activated`, `frameReceived`, `heartbeat`, ...) with the
/// current time and performs the ``Action`` each returns. It never touches a socket, so it is
/// tested with plain values. Once it fails or closes it stays closed and ignores further events.
struct ConnectionStateMachine {
    /// Protocol parameters for one connection.
    struct Configuration: Sendable {
        var localHello: Hello
        var heartbeatInterval: TimeAmount
        var peerTimeout: TimeAmount
        var handshakeTimeout: TimeAmount
    }

    /// A protocol frame the handler must send.
    enum ControlFrame: Equatable, Sendable {
        case hello(Hello)
        case ping(id: String)
        case pong(replyTo: String?)
        case bye(reason: String?)
        case error(reason: String, replyTo: String?)
    }

    /// Why a connection had to be closed.
    enum Failure: Equatable, Sendable {
        case handshake(String)
        case malformed(String)
        case frameTooLarge(length: Int, limit: Int)
        case timedOut(silence: TimeAmount)
    }

    /// What the handler must do after an event.
    enum Action: Equatable {
        case none
        case send(ControlFrame)
        /// The handshake completed; tell the connection layer who the peer is.
        case established(Hello)
        /// An application message (or a reply) for the messaging layer.
        case deliver(Envelope)
        /// Send `peerkit.error` with the failure's reason (unless the peer timed out), then close.
        case fail(Failure)
        /// The peer said bye: close.
        case close(byeReason: String?)
        /// The peer reported a connection-level error; log it (the peer closes).
        case peerReportedError(String)
    }

    private enum State: Equatable {
        case idle
        case awaitingHello(since: NIODeadline)
        case established(remote: Hello)
        case closed
    }

    let configuration: Configuration
    private var state: State = .idle
    private var lastHeard: NIODeadline = .uptimeNanoseconds(0)
    private var outstandingPing: String?
    private var pingCount = 0

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The remote hello, once the handshake is complete.
    var remoteHello: Hello? {
        if case let .established(remote) = state { return remote }
        return nil
    }

    var isClosed: Bool { state == .closed }

    // MARK: Events

    /// The TCP connection is up: send our hello.
    mutating func activated(now: NIODeadline) -> Action {
        guard case .idle = state else { return .none }
        state = .awaitingHello(since: now)
        lastHeard = now
        return .send(.hello(configuration.localHello))
    }

    /// A frame arrived and parsed as an envelope.
    mutating func frameReceived(_ envelope: Envelope, now: NIODeadline) -> Action {
        switch state {
        case .idle, .closed:
            return .none
        case .awaitingHello:
            return receiveHello(envelope, now: now)
        case .established:
            lastHeard = now
            guard envelope.isControl else { return .deliver(envelope) }
            switch envelope.type {
            case EnvelopeType.ping:
                return .send(.pong(replyTo: envelope.id))
            case EnvelopeType.pong:
                if envelope.replyTo == outstandingPing { outstandingPing = nil }
                return .none
            case EnvelopeType.bye:
                state = .closed
                let bye = try? JSONDecoder().decode(Bye.self, from: envelope.payload)
                return .close(byeReason: bye?.reason)
            case EnvelopeType.error:
                if envelope.replyTo != nil { return .deliver(envelope) }
                let payload = try? JSONDecoder().decode(ErrorPayload.self, from: envelope.payload)
                return .peerReportedError(payload?.reason ?? "the peer reported an error without a reason")
            case EnvelopeType.hello:
                return fail(.handshake("a second peerkit.hello arrived after the handshake"))
            default:
                // A control type from a later protocol version: ignore it.
                return .none
            }
        }
    }

    /// A frame could not be read (too large, truncated, or not an envelope).
    mutating func frameRejected(_ error: WireError) -> Action {
        guard state != .closed else { return .none }
        switch error {
        case let .frameTooLarge(length, limit):
            return fail(.frameTooLarge(length: length, limit: limit))
        case .truncatedFrame, .malformedEnvelope:
            return fail(.malformed(error.reason))
        }
    }

    /// Called every heartbeat interval: ping an idle peer, drop a silent one.
    mutating func heartbeat(now: NIODeadline) -> Action {
        switch state {
        case .idle, .closed:
            return .none
        case let .awaitingHello(since):
            if now - since >= configuration.handshakeTimeout {
                return fail(.handshake("no peerkit.hello arrived within \(configuration.handshakeTimeout.seconds) s"))
            }
            return .none
        case .established:
            let silence = now - lastHeard
            if silence >= configuration.peerTimeout {
                return fail(.timedOut(silence: silence))
            }
            if silence >= configuration.heartbeatInterval, outstandingPing == nil {
                pingCount += 1
                let id = "ping-\(pingCount)"
                outstandingPing = id
                return .send(.ping(id: id))
            }
            return .none
        }
    }

    /// We are closing the connection: say bye if the handshake completed.
    mutating func closeRequested(reason: String? = nil) -> Action {
        defer { state = .closed }
        if case .established = state { return .send(.bye(reason: reason)) }
        return .none
    }

    // MARK: Handshake

    private mutating func receiveHello(_ envelope: Envelope, now: NIODeadline) -> Action {
        guard envelope.type == EnvelopeType.hello else {
            if envelope.type == EnvelopeType.error {
                let payload = try? JSONDecoder().decode(ErrorPayload.self, from: envelope.payload)
                state = .closed
                return .fail(.handshake("the peer refused the connection: \(payload?.reason ?? "no reason given")"))
            }
            return fail(.handshake("the first frame was a \"\(envelope.type)\" message, not peerkit.hello"))
        }
        let hello: Hello
        do {
            hello = try JSONDecoder().decode(Hello.self, from: envelope.payload)
        } catch {
            return fail(.handshake("the peerkit.hello payload lacks protocol, peerID, name or serviceType"))
        }
        let local = configuration.localHello
        guard hello.protocol == Hello.currentProtocol else {
            return fail(.handshake("the peer speaks protocol \(hello.protocol), and this peer speaks only protocol \(Hello.currentProtocol)"))
        }
        guard hello.serviceType == local.serviceType else {
            return fail(.handshake("the peer's service type is \"\(hello.serviceType)\", not \"\(local.serviceType)\""))
        }
        guard !hello.peerID.isEmpty else {
            return fail(.handshake("the peer's peerID is empty"))
        }
        guard hello.peerID != local.peerID else {
            return fail(.handshake("the connection leads back to this peer itself"))
        }
        state = .established(remote: hello)
        lastHeard = now
        return .established(hello)
    }

    private mutating func fail(_ failure: Failure) -> Action {
        state = .closed
        return .fail(failure)
    }
}

extension ConnectionStateMachine.Failure {
    /// The reason as a sentence fragment, sent to the peer in `peerkit.error`.
    var reason: String {
        switch self {
        case let .handshake(reason), let .malformed(reason):
            return reason
        case let .frameTooLarge(length, limit):
            return "a frame of \(length) bytes exceeds the \(limit)-byte limit"
        case let .timedOut(silence):
            return "nothing arrived for \(silence.seconds) s"
        }
    }

    /// The failure as the public error, naming the peer.
    func error(peer: String) -> PeerKitError {
        switch self {
        case let .handshake(reason): return .handshakeFailed(reason: reason, peer: peer)
        case let .malformed(reason): return .malformedFrame(reason: reason, peer: peer)
        case let .frameTooLarge(length, limit): return .frameTooLarge(length: length, limit: limit, peer: peer)
        case let .timedOut(silence): return .peerTimedOut(peer: peer, silence: .nanoseconds(silence.nanoseconds))
        }
    }
}

extension TimeAmount {
    /// The amount in seconds, for messages.
    var seconds: Double { Double(nanoseconds) / 1e9 }
}
