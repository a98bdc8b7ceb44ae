import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The resource transfers of one transceiver session, in both directions: routes
/// `peerkit.resource.*` frames and chunks to them, applies the receiver's limits, and runs the
/// handler registered for each incoming resource's name.
///
/// Frames arrive on the connections' event loops and are handled without blocking; handlers and
/// outgoing transfers run in child tasks of the session, so a large transfer never holds up the
/// message dispatcher and none outlives the session.
final class ResourceTransfers: ResourceFrameSink {
    /// The limits a receiver applies, and the sender's chunk length (from ``PeerConfiguration``).
    struct Limits: Sendable {
        var chunkLength: Int
        var window: Int
        var maximumConcurrentIncoming: Int
        var maximumConcurrentIncomingPerConnection: Int
        /// What one address may hold: never every slot (one fewer, when there are 2 or more).
        var maximumConcurrentIncomingPerAddress: Int {
            max(1, maximumConcurrentIncoming - 1)
        }
        var maximumIncomingBytes: Int64
        /// The receiver's frame limit: a chunk's frame must fit.
        var maximumFrameLength: Int
        /// How long a transfer may wait on its peer without progress (see
        /// ``PeerConfiguration/resourceStallTimeout``).
        var stallTimeout: Duration
    }

    /// A transfer on one connection, by the sender's number.
    private struct Key: Hashable {
        var connection: ObjectIdentifier
        var transfer: UInt32
    }

    /// A transfer's stall check, by direction (each side numbers its own transfers).
    private struct StallCheckKey: Hashable {
        var key: Key
        var incoming: Bool
    }

    private struct State {
        var nextTransfer: UInt32 = 1
        var outgoing: [Key: OutgoingResource] = [:]
        var incoming: [Key: IncomingResource] = [:]
        /// Who sends each incoming transfer (see ``ResourceTransfers/sender(of:)``).
        var senders: [Key: Sender] = [:]
        /// The stall check of each transfer, cancelled when it ends.
        var stallChecks: [StallCheckKey: PeerTimer] = [:]
        /// Connections whose close is watched (to fail their transfers).
        var watched: Set<ObjectIdentifier> = []
        var stopped = false
    }

    private let registry: ResourceRegistry
    private let limits: Limits
    private let clock: PeerClock
    private let logger: Logger
    private let state = NIOLockedValueBox(State())

    /// Where the receivers' handlers and the outgoing transfers run: child tasks of the session
    /// (none outlives it); nil runs each in a task of its own (tests of the transfers alone).
    private let tasks: SessionTasks?

    /// Whether this side resumes sessions (``PeerConfiguration/resumesSessions``): a peer whose
    /// connection ends may then stay connected (suspended), and its transfers' errors say so.
    private let resumesSessions: Bool

    init(registry: ResourceRegistry, limits: Limits, clock: PeerClock, logger: Logger, tasks: SessionTasks? = nil, resumesSessions: Bool = false) {
        self.resumesSessions = resumesSessions
        self.tasks = tasks
        self.registry = registry
        self.limits = limits
        self.clock = clock
        self.logger = logger
    }

    /// Who sends an incoming transfer, as the limits count it: by what the peer cannot choose,
    /// since a peer ID is anyone's to claim in plaintext or with a shared key.
    struct Sender: Equatable, Sendable {
        /// In certificates mode its verified fingerprint (every connection with that
        /// certificate); else its connection (two connections claiming two IDs are two senders,
        /// but see `address`).
        var identity: String
        /// Its address (an IPv6 address by its /64 prefix); nil for a connection without one (a
        /// test transport's).
        var address: String?
    }

    /// Who sends on `connection`.
    static func sender(of connection: PeerConnection) -> Sender {
        let identity = connection.peer?.fingerprint.map { "certificate " + $0 } ?? "connection \(ObjectIdentifier(connection))"
        return Sender(identity: identity, address: HandshakeSlots<ObjectIdentifier, Void>.source(of: connection.channel.remoteAddress))
    }

    /// The chunk length a receiver announces: the configured one, and never more than a frame holds.
    var acceptedChunkLength: Int {
        max(1, min(limits.chunkLength, limits.maximumFrameLength - ResourceChunkFrame.headerLength))
    }

    // MARK: Sending

    /// Starts sending `source` as `name` on `connection`.
    func send(_ source: ResourceSource, named name: String, to peer: Peer, on connection: PeerConnection) throws(PeerKitError) -> OutgoingResource {
        guard connection.remote?.supports(Hello.Feature.resources) == true else {
            throw PeerKitError.featureNotSupported(feature: Hello.Feature.resources, peer: connection.description)
        }
        guard !name.isEmpty, name.utf8.count <= ResourceFrame.maximumNameLength else {
            throw PeerKitError.resourceSourceFailed(name: name, reason: "a resource name must be 1 to \(ResourceFrame.maximumNameLength) bytes of UTF-8, and this one is \(name.utf8.count)")
        }
        let registered = state.withLockedValue { state -> OutgoingResource? in
            guard !state.stopped else { return nil }
            var transfer = state.nextTransfer
            while state.outgoing[Key(connection: ObjectIdentifier(connection), transfer: transfer)] != nil { transfer &+= 1 }
            state.nextTransfer = transfer &+ 1
            let resource = OutgoingResource(name: name, peer: peer, transfer: transfer, connection: connection, totalBytes: nil, clock: clock)
            state.outgoing[Key(connection: ObjectIdentifier(connection), transfer: transfer)] = resource
            return resource
        }
        guard let resource = registered else { throw PeerKitError.notRunning }
        watch(connection)
        let key = Key(connection: ObjectIdentifier(connection), transfer: resource.transfer)
        checkForStall(resource, key: StallCheckKey(key: key, incoming: false), in: limits.stallTimeout)
        let resumesSessions = resumesSessions
        let whenConnectionEnds: @Sendable () -> PeerKitError = { [name] in
            Self.failure(ofTransfer: name, whoseConnectionEnded: connection, resumesSessions: resumesSessions)
        }
        resource.start(source, chunkLength: limits.chunkLength, tasks: tasks, whenConnectionEnds: whenConnectionEnds) { [weak self] in
            let check = self?.state.withLockedValue { state -> PeerTimer? in
                state.outgoing.removeValue(forKey: key)
                return state.stallChecks.removeValue(forKey: StallCheckKey(key: key, incoming: false))
            }
            check?.cancel()
        }
        if connection.isClosed { connectionEnded(connection) }
        return resource
    }

    // MARK: Frames from peers (on the connection's event loop)

    /// A `peerkit.resource.*` frame arrived.
    func received(_ envelope: Envelope, from peer: Peer, on connection: PeerConnection) {
        do {
            switch envelope.type {
            case ResourceFrame.offer:
                offered(try decode(ResourceFrame.Offer.self, envelope), from: peer, on: connection)
            case ResourceFrame.end:
                let end = try decode(ResourceFrame.End.self, envelope)
                if let problem = incoming(end.transfer, on: connection)?.endArrived(end) { violation(problem, on: connection) }
            case ResourceFrame.cancel:
                let stop = try decode(ResourceFrame.Stop.self, envelope)
                if let resource = incoming(stop.transfer, on: connection) {
                    let reason = "the sender cancelled it: \(LogSafe.text(stop.reason, maximumBytes: ResourceFrame.maximumReasonLength))"
                    logger.info("\(connection) cancelled the resource \"\(LogSafe.text(resource.name, maximumBytes: 80))\" it was sending.")
                    resource.fail(.resourceCancelled(name: resource.name, peer: connection.description, reason: reason), tellPeer: nil)
                }
            case ResourceFrame.accept:
                let accept = try decode(ResourceFrame.Accept.self, envelope)
                guard accept.window > 0, accept.chunk > 0 else {
                    return violation("a peerkit.resource.accept grants a window of \(accept.window) bytes and chunks of \(accept.chunk) bytes; both must be at least 1", on: connection)
                }
                outgoing(accept.transfer, on: connection)?.accepted(window: accept.window, chunk: accept.chunk)
            case ResourceFrame.ack:
                let ack = try decode(ResourceFrame.Ack.self, envelope)
                outgoing(ack.transfer, on: connection)?.acknowledged(ack.received)
            case ResourceFrame.done:
                outgoing(try decode(ResourceFrame.Done.self, envelope).transfer, on: connection)?.completed()
            case ResourceFrame.refuse:
                let stop = try decode(ResourceFrame.Stop.self, envelope)
                if let resource = outgoing(stop.transfer, on: connection) {
                    let reason = LogSafe.text(stop.reason, maximumBytes: ResourceFrame.maximumReasonLength)
                    resource.fail(.resourceRefused(name: resource.name, peer: connection.description, reason: reason), tellPeer: false)
                }
            default:
                // A resource frame of a later version: ignored, like other unknown control frames.
                break
            }
        } catch {
            violation("a \(envelope.type) payload is not valid: \(error)", on: connection)
        }
    }

    /// A binary chunk arrived.
    func received(_ chunk: ResourceChunk, from peer: Peer, on connection: PeerConnection) {
        // A chunk for no open transfer is one still in flight when this side cancelled: dropped.
        guard let resource = incoming(chunk.transfer, on: connection) else { return }
        if resource.size == nil, resource.receivedBytes + Int64(chunk.data.readableBytes) > limits.maximumIncomingBytes {
            let reason = "it grew over this peer's limit of \(limits.maximumIncomingBytes) bytes (PeerConfiguration.maximumIncomingResourceBytes)"
            logger.notice("Stopped the resource \"\(LogSafe.text(resource.name, maximumBytes: 80))\" from \(connection): \(reason).")
            resource.fail(.resourceCancelled(name: resource.name, peer: connection.description, reason: reason), tellPeer: "this peer refused it: " + reason)
            return
        }
        if let problem = resource.chunkArrived(chunk.data) { violation(problem, on: connection) }
    }

    private func offered(_ offer: ResourceFrame.Offer, from peer: Peer, on connection: PeerConnection) {
        let key = Key(connection: ObjectIdentifier(connection), transfer: offer.transfer)
        let name = LogSafe.text(offer.name, maximumBytes: 80)
        func refuse(_ reason: String) {
            logger.notice("Refused the resource \"\(name)\" from \(connection): \(reason).")
            connection.send(ResourceFrame.frame(ResourceFrame.refuse, ResourceFrame.Stop(transfer: offer.transfer, reason: "this peer refused it: " + reason)))
        }
        if offer.name.isEmpty || offer.name.utf8.count > ResourceFrame.maximumNameLength {
            return violation("a peerkit.resource.offer names a resource of \(offer.name.utf8.count) bytes; a name must be 1 to \(ResourceFrame.maximumNameLength) bytes", on: connection)
        }
        if let size = offer.size, size < 0 {
            return violation("a peerkit.resource.offer announces a size of \(size) bytes", on: connection)
        }
        guard let handler = registry.handler(for: offer.name) else {
            return refuse("no handler is registered for resources named \"\(name)\"")
        }
        if let size = offer.size, size > limits.maximumIncomingBytes {
            return refuse("it is \(size) bytes, over this peer's limit of \(limits.maximumIncomingBytes) bytes (PeerConfiguration.maximumIncomingResourceBytes)")
        }
        enum Decision { case accept(IncomingResource), duplicate, busy(Int), busyFromPeer(Int), busyFromAddress(Int), stopped }
        let window = limits.window
        let sender = Self.sender(of: connection)
        let decision = state.withLockedValue { state -> Decision in
            guard !state.stopped else { return .stopped }
            guard state.incoming[key] == nil else { return .duplicate }
            guard state.incoming.count < limits.maximumConcurrentIncoming else { return .busy(state.incoming.count) }
            // Counted by what the sender cannot choose: its certificate, else its connection;
            // and by its address, which never holds every slot.
            let fromSender = state.senders.values.count { $0.identity == sender.identity }
            guard fromSender < limits.maximumConcurrentIncomingPerConnection else { return .busyFromPeer(fromSender) }
            if let address = sender.address {
                let fromAddress = state.senders.values.count { $0.address == address }
                guard fromAddress < limits.maximumConcurrentIncomingPerAddress else { return .busyFromAddress(fromAddress) }
            }
            let resource = IncomingResource(name: offer.name, sender: peer, size: offer.size, transfer: offer.transfer, connection: connection, window: window, chunkLength: acceptedChunkLength, clock: clock) { [weak self] in
                let check = self?.state.withLockedValue { state -> PeerTimer? in
                    state.incoming.removeValue(forKey: key)
                    state.senders.removeValue(forKey: key)
                    return state.stallChecks.removeValue(forKey: StallCheckKey(key: key, incoming: true))
                }
                check?.cancel()
            }
            state.incoming[key] = resource
            state.senders[key] = sender
            return .accept(resource)
        }
        switch decision {
        case .stopped:
            refuse("it is stopping")
        case .duplicate:
            violation("a second peerkit.resource.offer arrived for the open transfer \(offer.transfer)", on: connection)
        case let .busy(count):
            refuse("it is already receiving \(count) resources, its limit (PeerConfiguration.maximumConcurrentIncomingResources)")
        case let .busyFromPeer(count):
            refuse("it is already receiving \(count) resources from this peer, its limit per peer (PeerConfiguration.maximumConcurrentIncomingResourcesPerPeer)")
        case let .busyFromAddress(count):
            refuse("it is already receiving \(count) resources from this peer's address, its limit per address (one less than PeerConfiguration.maximumConcurrentIncomingResources, so that one address never holds every slot)")
        case let .accept(resource):
            watch(connection)
            checkForStall(resource, key: StallCheckKey(key: key, incoming: true), in: limits.stallTimeout)
            connection.send(ResourceFrame.frame(ResourceFrame.accept, ResourceFrame.Accept(transfer: offer.transfer, window: window, chunk: acceptedChunkLength)))
            logger.debug("Receiving the resource \"\(name)\" from \(connection).")
            let logger = logger
            let handle: SessionTasks.Job = {
                do {
                    try await handler(resource)
                    if resource.isComplete {
                        resource.confirm()
                    } else if !resource.isEnded {
                        resource.cancelAfterLocalFailure("the receiver's handler returned before reading all of it")
                    }
                } catch {
                    if resource.isComplete {
                        resource.refuseAfterCompletion("the receiver's handler failed: \(error)")
                    } else if !resource.isEnded {
                        resource.cancelAfterLocalFailure("the receiver's handler failed: \(error)")
                    }
                    logger.warning("The handler of the resource \"\(name)\" from \(connection) failed: \(error)")
                }
            }
            if let tasks {
                // The session stopped meanwhile: nobody will read this resource.
                if !tasks.start(handle) { resource.cancelAfterLocalFailure("the receiving transceiver stopped") }
            } else {
                Task { await handle() }
            }
            if connection.isClosed { connectionEnded(connection) }
        }
    }

    // MARK: Ends

    /// Fails every transfer of `connection` with why it ended. Without a session that is the
    /// connection's own error, with which its peer is disconnected too. With one (feature resume)
    /// the peer may stay connected, suspended and then resumed on the next connection, but a
    /// transfer belongs to one connection: it fails with
    /// ``PeerKitError/resourceCancelled(name:peer:reason:)``, naming why the connection ended.
    func connectionEnded(_ connection: PeerConnection) {
        let id = ObjectIdentifier(connection)
        let (outgoing, incoming) = state.withLockedValue { state in
            state.watched.remove(id)
            return (state.outgoing.filter { $0.key.connection == id }.map(\.value), state.incoming.filter { $0.key.connection == id }.map(\.value))
        }
        guard !outgoing.isEmpty || !incoming.isEmpty else { return }
        for resource in outgoing {
            resource.fail(Self.failure(ofTransfer: resource.name, whoseConnectionEnded: connection, resumesSessions: resumesSessions), tellPeer: false)
        }
        for resource in incoming {
            resource.fail(Self.failure(ofTransfer: resource.name, whoseConnectionEnded: connection, resumesSessions: resumesSessions), tellPeer: nil)
        }
    }

    /// How a transfer named `name` fails when its connection ended: with the connection's own
    /// error, or, when the peer has a session (and may be resumed on another connection), with
    /// ``PeerKitError/resourceCancelled(name:peer:reason:)`` naming why the connection ended.
    static func failure(ofTransfer name: String, whoseConnectionEnded connection: PeerConnection, resumesSessions: Bool) -> PeerKitError {
        let cause = connection.closeError ?? .connectionClosed(peer: connection.description)
        guard resumesSessions, connection.remote?.resumableSession != nil else { return cause }
        return .resourceCancelled(name: name, peer: connection.description, reason: connectionEndedReason(cause))
    }

    /// Why a transfer whose connection ended was cancelled, as the clause of a sentence.
    static func connectionEndedReason(_ cause: PeerKitError) -> String {
        "the connection it used ended (\(cause.description.asClause)), and a transfer does not continue on another connection; send it again once the peer is connected"
    }

    /// The session stops: every transfer fails with ``PeerKitError/notRunning``.
    func stop() {
        let (outgoing, incoming) = state.withLockedValue { state in
            state.stopped = true
            return (Array(state.outgoing.values), Array(state.incoming.values))
        }
        for resource in outgoing { resource.fail(.notRunning, tellPeer: true) }
        for resource in incoming { resource.fail(.notRunning, tellPeer: "the receiver stopped") }
    }

    // MARK: Stalls

    /// Checks `resource` once `delay` has passed: cancelled if it has waited on its peer for the
    /// whole stall timeout, else checked again when it could be. Its timer is kept under `key`,
    /// to be cancelled when it ends.
    private func checkForStall(_ resource: some StallWatchedResource, key: StallCheckKey, in delay: Duration) {
        let timer = clock.schedule(on: resource.connection.channel.eventLoop, in: delay) { [weak self, weak resource] in
            guard let self, let resource else { return }
            let status = resource.stallStatus
            guard !status.ended else { return }
            if let next = self.nextCheck(after: status) {
                return self.checkForStall(resource, key: key, in: next)
            }
            resource.cancelStalled(after: self.limits.stallTimeout, logger: self.logger)
        }
        // Kept only while the transfer is registered: one that ended meanwhile has removed its
        // check already (under this lock), and its timer will find it ended.
        state.withLockedValue { state in
            let registered: AnyObject? = key.incoming ? state.incoming[key.key] : state.outgoing[key.key]
            if registered === resource { state.stallChecks[key] = timer }
        }
    }

    /// How long until a transfer in `status` should be checked again, or nil when it has waited
    /// on its peer without progress for the whole stall timeout.
    private func nextCheck(after status: ResourceStallStatus) -> Duration? {
        let idle = clock.offset - status.lastProgress
        guard status.waitsOnPeer else { return limits.stallTimeout }
        return idle >= limits.stallTimeout ? nil : limits.stallTimeout - idle
    }

    // MARK: Diagnostics (for tests)

    /// The bytes received so far of the incoming transfer numbered `transfer`, on any connection.
    func receivedBytes(incoming transfer: UInt32) -> Int64? {
        state.withLockedValue { $0.incoming.first { $0.key.transfer == transfer }?.value }?.receivedBytes
    }

    /// The stall status of the outgoing transfer numbered `transfer`, on any connection.
    func stallStatus(outgoing transfer: UInt32) -> ResourceStallStatus? {
        state.withLockedValue { $0.outgoing.first { $0.key.transfer == transfer }?.value }?.stallStatus
    }

    // MARK: Helpers

    private func watch(_ connection: PeerConnection) {
        let id = ObjectIdentifier(connection)
        let first = state.withLockedValue { $0.watched.insert(id).inserted }
        guard first else { return }
        connection.channel.closeFuture.whenComplete { [weak self] _ in self?.connectionEnded(connection) }
    }

    private func incoming(_ transfer: UInt32, on connection: PeerConnection) -> IncomingResource? {
        state.withLockedValue { $0.incoming[Key(connection: ObjectIdentifier(connection), transfer: transfer)] }
    }

    private func outgoing(_ transfer: UInt32, on connection: PeerConnection) -> OutgoingResource? {
        state.withLockedValue { $0.outgoing[Key(connection: ObjectIdentifier(connection), transfer: transfer)] }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ envelope: Envelope) throws -> T {
        try envelope.decodePayload(T.self)
    }

    private func violation(_ reason: String, on connection: PeerConnection) {
        logger.warning("Closing the connection to \(connection): \(reason).")
        connection.fail(reason)
    }
}

/// The handlers of incoming resources, by name.
final class ResourceRegistry: Sendable {
    /// Reads one incoming resource.
    typealias Handler = @Sendable (IncomingResource) async throws -> Void

    private let handlers = NIOLockedValueBox<[String: Handler]>([:])

    func register(_ name: String, _ handler: @escaping Handler) {
        handlers.withLockedValue { $0[name] = handler }
    }

    func remove(_ name: String) {
        handlers.withLockedValue { $0[name] = nil }
    }

    func handler(for name: String) -> Handler? {
        handlers.withLockedValue { $0[name] }
    }
}
