import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PeerKit

/// A scripted peer on a ``TestNetwork`` that speaks PeerKit's wire protocol itself (no
/// `PeerTransceiver` inside), for testing one side of a conversation: tell it how to answer,
/// let the app under test talk to it, then check what it received, in order, with the sender.
///
/// ```swift
/// let store = network.startFakePeer(named: "store")
/// store.answer(ListItemsCommand.self, with: CLIResponse.message("[ ] Milk"))
/// // … the app connects and sends its request …
/// #expect(try store.received(ListItemsCommand.self).count == 1)
/// ```
///
/// It is advertised like a transceiver, accepts the connections transceivers dial, sends its
/// hello, answers pings (unless ``answersPings`` is false), records every message that is not a
/// protocol frame, answers requests whose type it was given an answer for, and answers other
/// requests with `peerkit.error` as PeerKit does.
public final class FakePeer: TestNetworkMember, Sendable {
    /// The name it advertises and says in its hello.
    public let name: String
    /// Its peer ID.
    public let peerID: String
    /// Its service type.
    public let serviceType: String
    /// Its node on the network.
    public let testNodeID: Int
    let network: TestNetwork

    /// Who sent a message: the name and peer ID from the hello of the connection it came on.
    public struct Sender: Sendable, Hashable, CustomStringConvertible {
        /// The sender's name.
        public let name: String
        /// The sender's peer ID.
        public let peerID: String
        /// The name in quotes.
        public var description: String { "\"\(name)\"" }
    }

    /// A message the fake peer received.
    public struct Message: Sendable, CustomStringConvertible {
        /// The wire key (`type`) of the message.
        public let type: String
        /// The `id` of a request.
        public let id: String?
        /// The payload as JSON.
        public let payload: Data
        /// Who sent it.
        public let sender: Sender

        /// The payload decoded as `T` (with Foundation's `JSONDecoder`, which PeerKit's codec agrees with).
        public func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder().decode(T.self, from: payload)
        }

        /// The type, the request id if any, the sender and the payload's JSON.
        public var description: String {
            "\(type)\(id.map { " (request \($0))" } ?? "") from \(sender): \(String(decoding: payload, as: UTF8.self))"
        }
    }

    typealias Answer = @Sendable (Data, Sender) throws -> (type: String, payload: Data)

    private struct State {
        var answers: [String: Answer] = [:]
        var answersPings = true
        var received: [Message] = []
        var errors: [String] = []
        var connections: [ObjectIdentifier: Connection] = [:]
        var stopped = false
    }

    struct Connection {
        var channel: any Channel
        var remote: Sender?
    }

    private let state = NIOLockedValueBox(State())

    init(network: TestNetwork, nodeID: Int, name: String, serviceType: String) {
        self.network = network
        self.testNodeID = nodeID
        self.name = name
        self.serviceType = serviceType
        self.peerID = UUID().uuidString
    }

    func start() {
        _ = try? network.listen(nodeID: testNodeID) { channel in
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RawFrameDecoder()))
            try channel.pipeline.syncOperations.addHandler(FakePeerHandler(peer: self))
        }
        network.startDiscovery(
            nodeID: testNodeID,
            request: DiscoveryRequest(serviceType: serviceType, peerID: peerID, peerName: name, port: testNodeID, txtRecord: ["peerid": peerID, "proto": "1"]),
            onEvent: { _ in }
        )
    }

    /// Says bye on every connection and stops being advertised.
    func stop() {
        let channels = state.withLockedValue { state -> [any Channel] in
            state.stopped = true
            return state.connections.values.map(\.channel)
        }
        network.stopListening(nodeID: testNodeID)
        network.stopDiscovery(nodeID: testNodeID)
        for channel in channels {
            channel.writeAndFlush(Self.frame(type: "peerkit.bye", payload: Data("{}".utf8), allocator: channel.allocator)).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }

    // MARK: Script

    /// Answers every request of type `Request` with `reply`.
    public func answer<Request, Reply: Encodable & Sendable>(_ type: Request.Type, with reply: Reply) {
        let replyType = peerMessageType(of: Reply.self)
        let encoded = Result { try JSONEncoder().encode(reply) }
        state.withLockedValue { $0.answers[peerMessageType(of: Request.self)] = { _, _ in (replyType, try encoded.get()) } }
    }

    /// Answers every request of type `Request` with what `reply` returns for it and its sender;
    /// a `reply` that throws answers with `peerkit.error`, as a PeerKit handler that throws does.
    public func answer<Request: Decodable & SendableMetatype, Reply: Encodable & SendableMetatype>(_ type: Request.Type, using reply: @escaping @Sendable (Request, Sender) throws -> Reply) {
        let replyType = peerMessageType(of: Reply.self)
        state.withLockedValue {
            $0.answers[peerMessageType(of: Request.self)] = { payload, sender in
                let request = try JSONDecoder().decode(Request.self, from: payload)
                return (replyType, try JSONEncoder().encode(try reply(request, sender)))
            }
        }
    }

    /// Whether it answers `peerkit.ping`s (true by default). A fake that does not is a peer that
    /// went silent while its connection stays open.
    public var answersPings: Bool {
        get { state.withLockedValue { $0.answersPings } }
        set { state.withLockedValue { $0.answersPings = newValue } }
    }

    // MARK: Acting

    /// Sends `payload` as a message (no reply expected) to every connected peer called `peerName`,
    /// or to every connected peer when nil.
    public func send<T: Encodable>(_ payload: T, to peerName: String? = nil) throws {
        let data = try JSONEncoder().encode(payload)
        let type = peerMessageType(of: T.self)
        sendFrame(to: peerName) { Self.frame(type: type, payload: data, allocator: $0) }
    }

    /// Sends `bytes` as they are (not framed) to the connected peers called `peerName` (or all):
    /// for testing what a peer does with a protocol violation.
    public func sendRaw(_ bytes: [UInt8], to peerName: String? = nil) {
        sendFrame(to: peerName) { $0.buffer(bytes: bytes) }
    }

    private func sendFrame(to peerName: String?, _ make: (ByteBufferAllocator) -> ByteBuffer) {
        let channels = state.withLockedValue { state in
            state.connections.values.filter { connection in
                guard let remote = connection.remote else { return false }
                return peerName == nil || remote.name == peerName
            }.map(\.channel)
        }
        for channel in channels { channel.writeAndFlush(make(channel.allocator), promise: nil) }
    }

    // MARK: Observing

    /// Every message received so far (protocol frames excepted), in the order they arrived.
    public var received: [Message] { state.withLockedValue { $0.received } }

    /// The payloads of the messages of type `T` received so far, in order.
    public func received<T: Decodable>(_ type: T.Type) throws -> [T] {
        let key = peerMessageType(of: T.self)
        return try received.filter { $0.type == key }.map { try $0.decode(T.self) }
    }

    /// The reasons of the `peerkit.error` frames received.
    public var errorsReceived: [String] { state.withLockedValue { $0.errors } }

    /// The peers whose hello it has received, on connections still open.
    public var connectedPeers: [Sender] {
        state.withLockedValue { $0.connections.values.compactMap(\.remote) }.sorted { $0.name < $1.name }
    }

    /// Waits until `count` messages have arrived (see ``TestNetwork/eventually(_:_:)``) and returns them.
    @discardableResult
    public func waitForMessages(count: Int) async throws -> [Message] {
        try await network.eventually("\(name) received \(count) messages") { self.received.count >= count }
        return received
    }

    // MARK: Protocol (called by FakePeerHandler on the event loop)

    func connected(_ channel: any Channel) {
        state.withLockedValue { $0.connections[ObjectIdentifier(channel)] = Connection(channel: channel) }
        let hello: [String: Any] = ["protocol": 1, "peerID": peerID, "name": name, "serviceType": serviceType]
        let payload = (try? JSONSerialization.data(withJSONObject: hello, options: [.sortedKeys])) ?? Data("{}".utf8)
        channel.writeAndFlush(Self.frame(type: "peerkit.hello", payload: payload, allocator: channel.allocator), promise: nil)
    }

    func disconnected(_ channel: any Channel) {
        state.withLockedValue { _ = $0.connections.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func handle(_ frame: TestFrame, on channel: any Channel) {
        var body = frame.bytes
        guard body.readInteger(as: UInt32.self) != nil, let data = body.readData(length: body.readableBytes),
              let envelope = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let type = envelope["type"] as? String else {
            channel.close(promise: nil)
            return
        }
        let payloadObject = envelope["payload"] ?? [String: Any]()
        let payload = (try? JSONSerialization.data(withJSONObject: payloadObject, options: [.fragmentsAllowed])) ?? Data("{}".utf8)
        let id = envelope["id"] as? String
        let key = ObjectIdentifier(channel)
        switch type {
        case "peerkit.hello":
            let fields = payloadObject as? [String: Any] ?? [:]
            let sender = Sender(name: fields["name"] as? String ?? "", peerID: fields["peerID"] as? String ?? "")
            state.withLockedValue { $0.connections[key]?.remote = sender }
        case "peerkit.ping":
            if answersPings, let id {
                channel.writeAndFlush(Self.frame(type: "peerkit.pong", replyTo: id, payload: Data("{}".utf8), allocator: channel.allocator), promise: nil)
            }
        case "peerkit.bye":
            channel.close(promise: nil)
        case "peerkit.error":
            let reason = (payloadObject as? [String: Any])?["reason"] as? String ?? ""
            state.withLockedValue { $0.errors.append(reason) }
        case _ where type.hasPrefix("peerkit."):
            break
        default:
            let (sender, answer) = state.withLockedValue { ($0.connections[key]?.remote, $0.answers[type]) }
            guard let sender else { return }
            state.withLockedValue { $0.received.append(Message(type: type, id: id, payload: payload, sender: sender)) }
            guard let id else { return }
            let reply: (type: String, payload: Data)
            if let answer {
                do {
                    reply = try answer(payload, sender)
                } catch {
                    reply = ("peerkit.error", Self.reason("The fake peer's answer failed: \(error)."))
                }
            } else {
                reply = ("peerkit.error", Self.reason("No handler for type \(type)."))
            }
            channel.writeAndFlush(Self.frame(type: reply.type, replyTo: id, payload: reply.payload, allocator: channel.allocator), promise: nil)
        }
    }

    private static func reason(_ text: String) -> Data {
        (try? JSONSerialization.data(withJSONObject: ["reason": text])) ?? Data("{}".utf8)
    }

    /// A frame: the 4-byte length, then the envelope `{"type":…,"replyTo":…,"payload":…}`.
    static func frame(type: String, replyTo: String? = nil, payload: Data, allocator: ByteBufferAllocator) -> ByteBuffer {
        var json = Data("{\"type\":".utf8)
        json.append((try? JSONEncoder().encode(type)) ?? Data("\"\"".utf8))
        if let replyTo {
            json.append(Data(",\"replyTo\":".utf8))
            json.append((try? JSONEncoder().encode(replyTo)) ?? Data("\"\"".utf8))
        }
        json.append(Data(",\"payload\":".utf8))
        json.append(payload)
        json.append(Data("}".utf8))
        var buffer = allocator.buffer(capacity: json.count + 4)
        buffer.writeInteger(UInt32(json.count))
        buffer.writeBytes(json)
        return buffer
    }
}

/// A fake peer's side of one connection.
final class FakePeerHandler: ChannelInboundHandler {
    typealias InboundIn = TestFrame
    private let peer: FakePeer
    private var greeted = false

    init(peer: FakePeer) {
        self.peer = peer
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { greet(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        greet(context)
        context.fireChannelActive()
    }

    private func greet(_ context: ChannelHandlerContext) {
        guard !greeted else { return }
        greeted = true
        peer.connected(context.channel)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        peer.handle(unwrapInboundIn(data), on: context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        peer.disconnected(context.channel)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
