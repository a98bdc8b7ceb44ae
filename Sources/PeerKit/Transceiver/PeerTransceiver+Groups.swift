extension PeerTransceiver {
    /// Joins `group`: from now on messages sent to the group by any peer reach this transceiver.
    ///
    /// Groups work as in Zyre (JOIN, LEAVE, SHOUT): any peer may send to a group with
    /// `send(_:toGroup:)`, and only its members receive. Every connected peer hears of the change
    /// at once, and a peer that connects later learns this transceiver's groups right after the
    /// handshake. Membership is kept across ``stop()`` and a new start. Joining a group twice does
    /// nothing.
    ///
    /// ```swift
    /// try transceiver.join("kitchen")
    /// transceiver.receive(LightCommand.self) { command, sender in … }  // also for group messages
    /// try await transceiver.send(LightCommand(on: true), toGroup: "kitchen")
    /// ```
    ///
    /// Only peers whose hello lists the `groups` feature take part; an older peer is a member of
    /// no group and is never sent membership frames.
    /// - Throws: ``PeerKitError/invalidGroup(_:reason:)`` for a name that is empty, longer than
    ///   ``PeerConfiguration/maximumGroupNameLength`` or holds control characters, or when this
    ///   transceiver is in ``PeerConfiguration/maximumGroupsPerPeer`` groups already.
    public func join(_ group: String) throws(PeerKitError) {
        try groupDirectory.join(group)
    }

    /// Leaves `group`: messages sent to it no longer reach this transceiver's handlers, including
    /// ones already on their way when it left. Leaving a group not joined does nothing.
    public func leave(_ group: String) {
        groupDirectory.leave(group)
    }

    /// The groups this transceiver is in, sorted.
    public var groups: [String] {
        groupDirectory.groups
    }

    /// The connected peers in `group`, sorted by name. Membership changes arrive as
    /// ``PeerEvent/peerJoinedGroup(_:group:)`` and ``PeerEvent/peerLeftGroup(_:group:)``.
    public func peers(inGroup group: String) -> [Peer] {
        let members = groupDirectory.memberIDs(of: group)
        guard !members.isEmpty else { return [] }
        return connectedPeers.filter { members.contains($0.id) }
    }

    /// Sends `payload` to every connected peer in `group` (whether or not this transceiver is
    /// in it) and returns the peers it went to; none when the group has no members.
    ///
    /// The payload is encoded once. As `send(_:to:)`, it returns once the payload is queued for
    /// every member, first waiting for a member whose queue is full to drain. A member that left
    /// the group before the message arrived drops it.
    /// - Throws: ``PeerKitError/invalidGroup(_:reason:)`` for a name no peer can be in,
    ///   ``PeerKitError/encodingFailed(type:reason:)``, ``PeerKitError/notRunning``, or why a
    ///   member's connection ended while waiting for it to drain.
    @discardableResult
    public func send<T: Encodable>(_ payload: T, toGroup group: String) async throws -> [Peer] {
        try await send(MessageCodec.encode(payload), toGroup: group)
    }

    /// Sends a message given as its wire key and JSON text to every connected peer in `group`,
    /// as `send(_:toGroup:)` does for a Swift value.
    /// - Throws: as `send(_:to:)` for a ``RawPeerMessage``, and ``PeerKitError/invalidGroup(_:reason:)``.
    @discardableResult
    public func send(_ message: RawPeerMessage, toGroup group: String) async throws -> [Peer] {
        try await send(Self.encode(message), toGroup: group)
    }

    /// Sends `payload` as a request to every connected peer in `group` and waits for all their
    /// answers (each within `timeout`); returns one ``GroupReply`` per member, sorted by name,
    /// none when the group has no members.
    ///
    /// ```swift
    /// for reply in try await transceiver.request(StatusQuery(), toGroup: "lights", expecting: Status.self) {
    ///     print(reply.peer.name, (try? reply.result.get()) ?? "no answer")
    /// }
    /// ```
    /// A member's failure (a timeout, an error reply, its disconnection) is in its reply and
    /// does not fail the others. A member that left the group before the request arrived answers
    /// with ``PeerKitError/remoteError(reason:peer:)``.
    /// - Throws: ``PeerKitError/invalidGroup(_:reason:)``, ``PeerKitError/encodingFailed(type:reason:)``,
    ///   ``PeerKitError/notRunning`` or `CancellationError`.
    public func request<T: Encodable, R: Decodable & Sendable>(
        _ payload: T,
        toGroup group: String,
        expecting: R.Type,
        timeout: Duration = .seconds(5)
    ) async throws -> [GroupReply<R>] {
        try groupDirectory.validate(group)
        let session = try runningSession()
        let message = try MessageCodec.encode(payload)
        let members = groupDirectory.memberIDs(of: group).compactMap { session.manager.connectedPeer($0) }
        let expectedType = peerMessageType(of: R.self)
        let replies = try await withThrowingTaskGroup(of: GroupReply<R>.self) { tasks in
            for peer in members {
                tasks.addTask {
                    do {
                        let reply = try await self.exchange(message, id: self.nextRequestID(), with: peer, timeout: timeout, group: group)
                        guard reply.type == expectedType else {
                            throw PeerKitError.unexpectedReply(expected: expectedType, received: reply.type, peer: peer.name)
                        }
                        return GroupReply(peer: peer, result: .success(try MessageCodec.decode(R.self, from: reply)))
                    } catch let error as PeerKitError {
                        return GroupReply(peer: peer, result: .failure(error))
                    }
                }
            }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        return replies.sorted { ($0.peer.name, $0.peer.id) < ($1.peer.name, $1.peer.id) }
    }

    private func send(_ message: EncodedMessage, toGroup group: String) async throws -> [Peer] {
        try groupDirectory.validate(group)
        let session = try runningSession()
        let members = groupDirectory.memberIDs(of: group)
        let targets = members.compactMap { session.manager.connectedPeer($0) }
        guard !targets.isEmpty else { return [] }
        let frame = message.frame(group: group)
        for peer in targets {
            try await session.manager.send(frame, to: peer)
        }
        return targets.sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }
}

/// One member's answer to ``PeerTransceiver/request(_:toGroup:expecting:timeout:)``.
public struct GroupReply<Reply: Sendable>: Sendable {
    /// The member the request went to.
    public let peer: Peer
    /// Its reply, or why there is none (``PeerKitError/requestTimedOut(type:peer:timeout:)``,
    /// ``PeerKitError/remoteError(reason:peer:)``, ``PeerKitError/connectionClosed(peer:)``, ...).
    public let result: Result<Reply, PeerKitError>
}
