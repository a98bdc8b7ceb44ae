import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PeerKit

/// An in-memory network for testing code built on PeerKit: real ``PeerTransceiver``s, with
/// their real handshake, framing, dispatch and heartbeats, over connections that are pairs of
/// Unix sockets instead of TCP, with discovery scripted by the network instead of Avahi, and one
/// manual clock (``NetworkClock``) for every timer. No ports, no avahi-daemon, no waiting on the
/// wall clock.
///
/// ```swift
/// let network = TestNetwork()
/// let alice = try await network.startTransceiver(named: "alice")
/// let bob = try await network.startTransceiver(named: "bob")
/// try await network.waitUntilConnected(alice, bob)
/// network.partition(alice, bob)
/// await network.advance(by: .seconds(3))   // alice's peer timeout passes, in no time at all
/// ```
///
/// Each connection runs through a relay owned by the network, which is where faults happen on
/// demand: ``partition(_:_:)`` and ``heal(_:_:)``, ``dropFrames(from:to:where:)``,
/// ``delayFrames(from:to:by:)``, ``kill(_:)`` (a peer gone without a bye), ``stopReading(_:from:)``
/// (a slow reader), ``disappear(_:)`` and ``appear(_:)`` in discovery, and name collisions (two
/// peers advertising one name: the second is renamed `"name #2"`, as Avahi does).
///
/// Waiting is by quiescence, not by time: ``settle()`` returns once no frame is in flight and
/// the event loops are idle, and ``eventually(_:_:)`` fails at once when the network went quiet
/// without its condition becoming true, so a test fails in milliseconds rather than hanging.
/// Connections are plaintext: the relay reads frames to apply faults (security is tested over
/// real sockets).
public final class TestNetwork: Sendable {
    /// The clock of every timer of every transceiver on this network; ``advance(by:step:)``
    /// moves it. Give it to the code under test for its own timers, and they move with the network.
    public let clock: NetworkClock
    /// The event loops of the network's transceivers and relays.
    public let eventLoopGroup: any EventLoopGroup
    /// The service type transceivers get unless told otherwise.
    public let serviceType: String
    let logger: Logger
    let state = NIOLockedValueBox(State())

    struct State {
        var nextNodeID = 1
        var nodes: [Int: Node] = [:]
        /// Links by id, while open.
        var links: [Int: TestLink] = [:]
        var nextLinkID = 1
        /// Unordered node pairs that cannot reach each other.
        var partitions: Set<NodePair> = []
        /// Rules by direction.
        var dropRules: [Direction: [@Sendable (TestFrame) -> Bool]] = [:]
        var delays: [Direction: Duration] = [:]
        var stoppedReaders: Set<Direction> = []
        /// Connection attempts held by a partition, failed when it heals or the network shuts down.
        var heldConnects: [(pair: NodePair, promise: EventLoopPromise<Void>)] = []
        /// What the network started, to stop in ``shutdown()``.
        var transceivers: [PeerTransceiver] = []
        /// When each member tried to connect to each other one (clock offsets), for back-off tests.
        var attempts: [Direction: [Duration]] = [:]
        var fakePeers: [FakePeer] = []
    }

    /// One member of the network: a transceiver or a fake peer.
    struct Node {
        var id: Int
        var name: String
        var alive = true
        /// Set while the member listens: sets up an accepted channel.
        var accept: (@Sendable (any Channel) throws -> Void)?
        /// Set while the member's discovery runs.
        var discovery: Discovery?
        /// Members this one cannot see in discovery.
        var hiddenFrom: Set<Int> = []
        /// Whether it is advertised at all (``disappear(_:)`` clears it).
        var visible = true

        struct Discovery {
            var request: DiscoveryRequest
            /// The name it is advertised under (differs from the request after a collision).
            var advertisedName: String
            var onEvent: @Sendable (DiscoveryEvent) -> Void
        }
    }

    struct NodePair: Hashable {
        let low: Int, high: Int
        init(_ a: Int, _ b: Int) { (low, high) = a < b ? (a, b) : (b, a) }
    }

    struct Direction: Hashable {
        let from: Int, to: Int
    }

    /// Creates a network. Every transceiver made by it runs on `eventLoopGroup` (by default one
    /// shared event loop, so that what happens on the network happens in one order) and logs to
    /// `logger` (by default errors only: pass a logger at `.debug` to see everything).
    public init(serviceType: String = "testkit", eventLoopGroup: (any EventLoopGroup)? = nil, logger: Logger? = nil) {
        self.clock = NetworkClock()
        self.serviceType = serviceType
        self.eventLoopGroup = eventLoopGroup ?? Self.sharedGroup
        self.logger = logger ?? {
            var logger = Logger(label: "PeerKitTesting")
            logger.logLevel = .error
            return logger
        }()
    }

    /// One event loop for every network that was not given a group; never shut down, like NIO's singleton.
    static let sharedGroup: any EventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    // MARK: Members

    /// A configuration for a transceiver on this network: its clock, transport and discovery
    /// are the network's; everything else is PeerKit's default and can be changed before the
    /// transceiver is made.
    public func configuration(named name: String, serviceType: String? = nil) -> PeerConfiguration {
        let id = addNode(named: name)
        var configuration = PeerConfiguration(serviceType: serviceType ?? self.serviceType)
        configuration.peerName = name
        configuration.clock = clock
        configuration.eventLoopGroup = eventLoopGroup
        configuration.transport = TestTransport(network: self, nodeID: id)
        configuration.discovery = .custom { TestDiscovery(network: self, nodeID: id) }
        var logger = logger
        logger[metadataKey: "peer"] = "\(name)"
        configuration.logger = logger
        return configuration
    }

    /// Makes and starts a transceiver called `name`; `configure` may change its configuration
    /// first. The network stops it in ``shutdown()``.
    public func startTransceiver(named name: String, serviceType: String? = nil, configure: (inout PeerConfiguration) -> Void = { _ in }) async throws -> PeerTransceiver {
        var made = self.configuration(named: name, serviceType: serviceType)
        configure(&made)
        let transceiver = PeerTransceiver(configuration: made)
        state.withLockedValue { $0.transceivers.append(transceiver) }
        try await transceiver.start()
        return transceiver
    }

    /// Starts a ``FakePeer`` called `name`: a scripted peer that speaks the wire protocol,
    /// advertised like a transceiver.
    ///
    /// `configure` runs before the fake peer is advertised, so that faults and answers are in
    /// place before anyone can connect to it: a frame it sends the moment it is connected (its
    /// hello) is already subject to a ``dropFrames(from:to:where:)`` rule set there.
    ///
    /// ```swift
    /// let mute = network.startFakePeer(named: "mute") { mute in
    ///     network.dropFrames(from: mute, to: alice) { $0.type == "peerkit.hello" }
    /// }
    /// ```
    @discardableResult
    public func startFakePeer(named name: String, serviceType: String? = nil, configure: (FakePeer) -> Void = { _ in }) -> FakePeer {
        let id = addNode(named: name)
        let peer = FakePeer(network: self, nodeID: id, name: name, serviceType: serviceType ?? self.serviceType)
        state.withLockedValue { $0.fakePeers.append(peer) }
        configure(peer)
        peer.start()
        return peer
    }

    func addNode(named name: String) -> Int {
        state.withLockedValue { state in
            let id = state.nextNodeID
            state.nextNodeID += 1
            state.nodes[id] = Node(id: id, name: name)
            return id
        }
    }

    /// Stops every transceiver and fake peer the network started (each says bye) and closes
    /// every connection. Faults are cleared and partitions healed first, so that every bye can
    /// be sent; the clock is then advanced 6 s, past every closing deadline (a bye's 1 s, a
    /// retired duplicate's 5 s handshake timeout), and what is still open is closed at both ends.
    public func shutdown() async {
        clearFaults()
        let held = state.withLockedValue { state -> [EventLoopPromise<Void>] in
            state.partitions = []
            defer { state.heldConnects = [] }
            return state.heldConnects.map(\.promise)
        }
        for promise in held { promise.fail(TestNetworkError.shutDown) }
        let (transceivers, fakes) = state.withLockedValue { ($0.transceivers, $0.fakePeers) }
        for fake in fakes { fake.stop() }
        // Each says bye (stop() sends the byes in the background); the clock is then advanced
        // past every closing deadline, and what is still open is closed at both ends. Nothing
        // here waits on a transceiver's own shutdown (see Documentation/Testing.md, "Known
        // problems").
        for transceiver in transceivers { transceiver.stop() }
        await settle()
        // Past every closing deadline, moving from one to the next.
        await advance(by: .seconds(6))
        let links = state.withLockedValue { Array($0.links.values) }
        for link in links { link.closeEverything() }
        await settle()
    }

    // MARK: Time

    /// Advances the clock by `duration`, from one deadline to the next, letting the network
    /// settle at each: what happens is what would happen on a fast network in real time.
    ///
    /// The clock moves straight to the next deadline the network knows of (a timer of a
    /// transceiver it started, a delayed frame, any other sleep on ``clock``, such as a timer of
    /// the code under test), the network settles, and so on until `duration` has passed. A ping
    /// sent at one deadline is therefore answered before the next deadline comes, and ten seconds
    /// of idle heartbeats cost forty moves. Give a `step` to move at most that far at a time as
    /// well, to look at the network more often (a `Task` of the test's own that a sleep's end
    /// woke is not waited for: only the network is).
    ///
    /// The network settles before the clock first moves, so that whatever the test started just
    /// before (a request, a broadcast) has sent its frames and set its timers at the current
    /// time. Work the test starts in a `Task` of its own may not have begun by then: start it
    /// with `Task.immediate`, which runs it up to its first suspension before going on, or wait
    /// for a sign of it (``eventually(_:_:)``) before advancing.
    public func advance(by duration: Duration, step: Duration? = nil) async {
        await settle()
        var left = duration
        while left > .zero {
            var next = min(step ?? left, left)
            if let deadline = timeUntilNextDeadline, deadline > .zero { next = min(next, deadline) }
            clock.advance(by: next)
            await settle()
            left -= next
        }
    }

    /// How long until the next deadline the network knows of: the earliest timer of a
    /// transceiver it started (set, whether or not its task sleeps yet), delayed frame, or other
    /// sleep on the clock. Nil when there is none.
    private var timeUntilNextDeadline: Duration? {
        let (links, transceivers) = state.withLockedValue { (Array($0.links.values), $0.transceivers) }
        let timers = transceivers.compactMap(\.timeUntilNextTimer)
        let frames = links.compactMap(\.timeUntilNextFrame)
        return (timers + frames + [clock.timeUntilNextWake].compactMap { $0 }).min()
    }

    /// Returns once the network is quiet: no bytes wait in any connection's sockets, no
    /// connection is half-way through closing, no delayed frame is due, no message waits for its
    /// handler and no timer is due and not yet run in a transceiver the network started, and the
    /// event loop and tasks have had their turn, three rounds in a row. It never moves the clock
    /// forward: it only reads it, to tell which timers and delayed frames are due. It gives up
    /// after ``maximumSettleRounds`` rounds on a network that stays busy.
    public func settle() async {
        _ = await settleOrStillBusy()
    }

    /// The most rounds ``settle()`` looks for quiet: 2,000, a few tenths of a second on an idle
    /// machine. A network busy for that long at a frozen clock has a lot to carry (a stream of
    /// thousands of messages can keep it busy for over a thousand rounds), is kept busy by
    /// something (a handler that never returns, a member sending without end), or is starved:
    /// hundreds of networks at once on the one shared event loop thread.
    static let maximumSettleRounds = 2_000

    /// ``settle()``: nil once the network is quiet, or, when it gave up after
    /// ``maximumSettleRounds`` rounds, what still kept it busy (a sentence fragment).
    private func settleOrStillBusy() async -> String? {
        var quietRounds = 0
        var busy: String?
        for _ in 0..<Self.maximumSettleRounds {
            for _ in 0..<4 { await Task.yield() }
            // Looked at on the event loop, between two of its tasks: a frame the loop is
            // passing from one socket to the next is then in one of them, not in neither.
            busy = (try? await eventLoopGroup.next().submit { self.busyWork }.get()) ?? nil
            quietRounds = busy == nil ? quietRounds + 1 : 0
            if quietRounds == 3 { return nil }
        }
        return busy
    }

    /// What work is in flight, in words (nil: none): bytes in a connection's sockets, a
    /// connection half-way through closing, a delayed frame or timer due and not yet passed on or
    /// run (its task is on its way: the clock never holds a sleep it has reached), or a message
    /// waiting for its handler or in it.
    private var busyWork: String? {
        let (links, transceivers) = state.withLockedValue { (Array($0.links.values), $0.transceivers) }
        if let late = transceivers.first(where: \.hasDueTimers) {
            return "a timer of \(late.configuration.peerName) is due and has not run"
        }
        for transceiver in transceivers {
            let count = transceiver.unhandledMessageCount
            if count > 0 {
                let messages = count == 1 ? "a message waiting for its handler or in it" : "\(count) messages waiting for their handlers or in them"
                return "\(transceiver.configuration.peerName) has \(messages)"
            }
        }
        guard let moving = links.first(where: { $0.hasDueFrames || $0.hasBytesInFlight }) else { return nil }
        let names = state.withLockedValue { state in [moving.dialler, moving.acceptor].map { state.nodes[$0]?.name ?? "member \($0)" } }
        return "bytes are on their way between \(names[0]) and \(names[1]), or their connection is closing"
    }

    /// Waits until `condition` holds, settling the network between checks. Throws
    /// ``TestNetworkError/neverHappened(_:)`` as soon as the network is quiet and the
    /// condition is still false: nothing more would happen without the clock moving. Throws
    /// ``TestNetworkError/stayedBusy(_:busy:)`` when the condition is still false after three
    /// settles and the last one gave up on a network that stayed busy (``maximumSettleRounds``).
    public func eventually(_ what: String, _ condition: @Sendable () -> Bool) async throws {
        var stillBusy: String?
        for _ in 0..<3 {
            if condition() { return }
            stillBusy = await settleOrStillBusy()
        }
        if condition() { return }
        if let stillBusy { throw TestNetworkError.stayedBusy(what, busy: stillBusy) }
        throw TestNetworkError.neverHappened(what)
    }

    /// Waits until each of `transceivers` is connected to every other one, and the network is
    /// quiet: when two of them dialled each other at once, the tie-break has retired the
    /// duplicate connection, so what the test sends next goes over the connection that stays.
    public func waitUntilConnected(_ transceivers: PeerTransceiver...) async throws {
        let names = transceivers.map(\.configuration.peerName)
        let connected: @Sendable () -> Bool = {
            transceivers.allSatisfy { transceiver in
                let connected = Set(transceiver.connectedPeers.map(\.id))
                return transceivers.allSatisfy { $0 === transceiver || connected.contains($0.peerID) }
            }
        }
        let what = "\(names.joined(separator: ", ")) connected to each other"
        try await eventually(what, connected)
        await settle()
        try await eventually(what, connected)
    }

    /// When `dialler` tried to connect to `target` so far, as offsets of the network's clock from
    /// its start: what redial back-off tests check.
    public func connectionAttempts(from dialler: some TestNetworkMember, to target: some TestNetworkMember) -> [Duration] {
        state.withLockedValue { $0.attempts[Direction(from: dialler.testNodeID, to: target.testNodeID)] ?? [] }
    }

    /// The clock's reading, as an offset from its start.
    public var elapsed: Duration { now }

    // MARK: Faults

    /// Cuts `a` off from `b`, as a link that goes down does: nothing between them gets through
    /// from now on, and a new connection between them hangs until its connect timeout. Their
    /// connections stay open until a heartbeat notices; what is sent on them meanwhile is held,
    /// as TCP holds what it cannot deliver, and arrives, late and in order, on a connection still
    /// open when the partition heals (one closed meanwhile loses it). A connection that stays up
    /// never loses a frame in between, as on a real network. A side's close (the end of output
    /// after its `bye`, or its socket closing after a heartbeat timeout) waits behind what is held
    /// from it, as a FIN does; a killed member's connections (``kill(_:)``) end at once.
    public func partition(_ a: some TestNetworkMember, _ b: some TestNetworkMember) {
        state.withLockedValue { _ = $0.partitions.insert(NodePair(a.testNodeID, b.testNodeID)) }
    }

    /// Ends a ``partition(_:_:)``: frames flow again, those held on connections still open first,
    /// and connection attempts it held fail (they timed out long ago for the dialler) so that the
    /// next attempt, after back-off, succeeds.
    public func heal(_ a: some TestNetworkMember, _ b: some TestNetworkMember) {
        let pair = NodePair(a.testNodeID, b.testNodeID)
        let (held, links) = state.withLockedValue { state -> ([EventLoopPromise<Void>], [TestLink]) in
            state.partitions.remove(pair)
            let held = state.heldConnects.filter { $0.pair == pair }.map(\.promise)
            state.heldConnects.removeAll { $0.pair == pair }
            return (held, state.links.values.filter { NodePair($0.dialler, $0.acceptor) == pair })
        }
        for promise in held { promise.fail(TestNetworkError.partitioned) }
        for link in links { link.releaseHeld() }
    }

    /// Changes `member`'s address, as renumbering its host does: each connection open now goes
    /// dead one way. What `member` sends on it still arrives (a host can go on sending from an
    /// address it no longer has, so its pings keep the other end loud), what is sent to it is
    /// lost (nothing is at that address any more), and its end of the connection, when it
    /// closes it, never reaches the other side, which keeps the connection until it gives up on
    /// it itself. Connections made afterwards, from and to `member`, work; nothing heals the old
    /// ones.
    public func changeAddress(of member: some TestNetworkMember) {
        let id = member.testNodeID
        let links = state.withLockedValue { state in
            state.links.values.filter { $0.dialler == id || $0.acceptor == id }
        }
        for link in links { link.strand(dialler: link.dialler == id) }
    }

    /// Drops frames from `sender` to `receiver` for which `predicate` is true (all of them by
    /// default), until ``clearFaults()``.
    public func dropFrames(from sender: some TestNetworkMember, to receiver: some TestNetworkMember, where predicate: @escaping @Sendable (TestFrame) -> Bool = { _ in true }) {
        let direction = Direction(from: sender.testNodeID, to: receiver.testNodeID)
        state.withLockedValue { $0.dropRules[direction, default: []].append(predicate) }
    }

    /// Holds every frame from `sender` to `receiver` for `delay` on the network's clock before
    /// passing it on, in order; until ``clearFaults()``. The sender's close comes after the frames
    /// before it, late too.
    public func delayFrames(from sender: some TestNetworkMember, to receiver: some TestNetworkMember, by delay: Duration) {
        let direction = Direction(from: sender.testNodeID, to: receiver.testNodeID)
        state.withLockedValue { $0.delays[direction] = delay }
    }

    /// Makes `reader` stop reading what `sender` sends it, as a peer that is too busy to read
    /// does: the bytes pile up in the sockets, then in `sender`'s outbox, until
    /// ``resumeReading(_:from:)``.
    public func stopReading(_ reader: some TestNetworkMember, from sender: some TestNetworkMember) {
        let direction = Direction(from: sender.testNodeID, to: reader.testNodeID)
        state.withLockedValue { _ = $0.stoppedReaders.insert(direction) }
        updateReading()
    }

    /// Ends ``stopReading(_:from:)``.
    public func resumeReading(_ reader: some TestNetworkMember, from sender: some TestNetworkMember) {
        let direction = Direction(from: sender.testNodeID, to: reader.testNodeID)
        state.withLockedValue { _ = $0.stoppedReaders.remove(direction) }
        updateReading()
    }

    /// Removes every drop rule, delay and stopped reader (partitions stay until healed).
    public func clearFaults() {
        state.withLockedValue { state in
            state.dropRules = [:]
            state.delays = [:]
            state.stoppedReaders = []
        }
        updateReading()
    }

    /// Kills `member` as a crash would: its connections are cut without a bye, and it can
    /// neither be reached (connections are refused) nor reach anyone any more. Its
    /// advertisement lingers, as a crashed host's DNS-SD record does until it expires: follow
    /// with ``disappear(_:)`` for a withdrawn one. A member that kept a resumable session with
    /// it suspends it, and ends it (`PeerKitError.peerExited`) at its first redial, which is
    /// refused; for a link that goes down and keeps the session, use ``partition(_:_:)``.
    public func kill(_ member: some TestNetworkMember) {
        let id = member.testNodeID
        let links = state.withLockedValue { state -> [TestLink] in
            state.nodes[id]?.alive = false
            return state.links.values.filter { $0.dialler == id || $0.acceptor == id }
        }
        for link in links { link.cut() }
    }

    /// Withdraws `member`'s advertisement: every other member's discovery reports it lost
    /// (its open connections stay).
    public func disappear(_ member: some TestNetworkMember) {
        let id = member.testNodeID
        state.withLockedValue { $0.nodes[id]?.visible = false }
        announceChanges()
    }

    /// Advertises `member` again after ``disappear(_:)``.
    public func appear(_ member: some TestNetworkMember) {
        let id = member.testNodeID
        state.withLockedValue { $0.nodes[id]?.visible = true }
        announceChanges()
    }

    /// Hides `member` from `observer`'s discovery only (reported lost to it), or shows it again.
    public func setVisible(_ visible: Bool, _ member: some TestNetworkMember, to observer: some TestNetworkMember) {
        let id = member.testNodeID
        let observerID = observer.testNodeID
        state.withLockedValue { state in
            if visible { state.nodes[id]?.hiddenFrom.remove(observerID) } else { state.nodes[id]?.hiddenFrom.insert(observerID) }
        }
        announceChanges()
    }

    // MARK: Transport (used by TestTransport and FakePeer)

    func listen(nodeID: Int, accept: @escaping @Sendable (any Channel) throws -> Void) throws -> Int {
        try state.withLockedValue { state in
            guard state.nodes[nodeID]?.alive == true else { throw TestNetworkError.killed }
            state.nodes[nodeID]?.accept = accept
        }
        return nodeID
    }

    func stopListening(nodeID: Int) {
        state.withLockedValue { $0.nodes[nodeID]?.accept = nil }
    }

    /// Connects `dialler` to the member listening on port `port` (its node id).
    func connect(from dialler: Int, toPort port: Int, configure: @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<Void> {
        let eventLoop = eventLoopGroup.next()
        enum Outcome { case refused(TestNetworkError), held(EventLoopPromise<Void>), open(accept: @Sendable (any Channel) throws -> Void, linkID: Int) }
        let now = self.now
        let outcome = state.withLockedValue { state -> Outcome in
            state.attempts[Direction(from: dialler, to: port), default: []].append(now)
            guard state.nodes[dialler]?.alive == true else { return .refused(.killed) }
            guard let target = state.nodes[port], target.alive, let accept = target.accept else {
                return .refused(.connectionRefused(port: port))
            }
            if state.partitions.contains(NodePair(dialler, port)) {
                let promise = eventLoop.makePromise(of: Void.self)
                state.heldConnects.append((NodePair(dialler, port), promise))
                return .held(promise)
            }
            let id = state.nextLinkID
            state.nextLinkID += 1
            return .open(accept: accept, linkID: id)
        }
        switch outcome {
        case let .refused(error):
            return eventLoop.makeFailedFuture(error)
        case let .held(promise):
            return promise.futureResult
        case let .open(accept, linkID):
            let link = TestLink(id: linkID, network: self, dialler: dialler, acceptor: port)
            state.withLockedValue { $0.links[linkID] = link }
            return link.open(diallerConfigure: configure, acceptorConfigure: accept)
        }
    }

    func linkClosed(_ id: Int) {
        state.withLockedValue { _ = $0.links.removeValue(forKey: id) }
    }

    /// What happens to a frame from `from` to `to` now: dropped, held until a partition heals, or
    /// passed on (after `delay`).
    func fate(of frame: TestFrame, from: Int, to: Int) -> (drop: Bool, hold: Bool, delay: Duration?) {
        state.withLockedValue { state in
            if state.nodes[from]?.alive != true || state.nodes[to]?.alive != true { return (true, false, nil) }
            if state.partitions.contains(NodePair(from, to)) { return (false, true, nil) }
            let direction = Direction(from: from, to: to)
            let dropped = state.dropRules[direction]?.contains { $0(frame) } ?? false
            return (dropped, false, state.delays[direction])
        }
    }

    func isReadingStopped(from: Int, to: Int) -> Bool {
        state.withLockedValue { $0.stoppedReaders.contains(Direction(from: from, to: to)) }
    }

    private func updateReading() {
        let links = state.withLockedValue { Array($0.links.values) }
        for link in links { link.updateReading() }
    }

    // MARK: Discovery (used by TestDiscovery and FakePeer)

    func startDiscovery(nodeID: Int, request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        let advertisedName = state.withLockedValue { state -> String in
            // A name another member of the service type advertises is taken: "name #2", as Avahi renames.
            let taken = Set(state.nodes.values.compactMap { node -> String? in
                guard node.id != nodeID, let discovery = node.discovery, discovery.request.port != nil,
                      discovery.request.serviceType == request.serviceType else { return nil }
                return discovery.advertisedName
            })
            var name = request.peerName
            var suffix = 2
            while request.port != nil, taken.contains(name) {
                name = "\(request.peerName) #\(suffix)"
                suffix += 1
            }
            state.nodes[nodeID]?.discovery = .init(request: request, advertisedName: name, onEvent: onEvent)
            return name
        }
        if request.port != nil { onEvent(.advertised(name: advertisedName)) }
        announceChanges()
    }

    func stopDiscovery(nodeID: Int) {
        let stopped = state.withLockedValue { state -> Bool in
            guard state.nodes[nodeID]?.discovery != nil else { return false }
            state.nodes[nodeID]?.discovery = nil
            return true
        }
        if stopped { announceChanges() }
    }

    /// What each member's discovery has reported so far, so that only changes are sent, and
    /// the events waiting to be delivered (with whether a thread is delivering them).
    private let reported = NIOLockedValueBox(Reported())

    struct Reported {
        var services: [Int: [String: DiscoveredService]] = [:]
        var queue: [(@Sendable (DiscoveryEvent) -> Void, DiscoveryEvent)] = []
        var delivering = false
    }

    /// Tells every browsing member what it can now see that differs from what it was told.
    /// Events are queued under a lock, in order, and delivered after it is released by whichever
    /// thread finds the queue unclaimed (as PeerKit's connection manager delivers its events).
    func announceChanges() {
        let nodes = state.withLockedValue { $0.nodes }
        let claimed = reported.withLockedValue { reported -> Bool in
            for observer in nodes.values.sorted(by: { $0.id < $1.id }) {
                guard let discovery = observer.discovery else {
                    reported.services[observer.id] = nil
                    continue
                }
                var visible: [String: DiscoveredService] = [:]
                for node in nodes.values where node.id != observer.id && node.visible && !node.hiddenFrom.contains(observer.id) {
                    guard let advertised = node.discovery, let port = advertised.request.port,
                          advertised.request.serviceType == discovery.request.serviceType else { continue }
                    let key = "test:\(advertised.advertisedName)"
                    visible[key] = DiscoveredService(
                        key: key, name: advertised.advertisedName, peerID: advertised.request.peerID,
                        endpoints: [PeerEndpoint(host: "testnetwork", port: port)],
                        txtRecord: advertised.request.txtRecord
                    )
                }
                let before = reported.services[observer.id] ?? [:]
                for key in before.keys.sorted() where visible[key] == nil {
                    reported.queue.append((discovery.onEvent, .lost(key: key)))
                }
                for (key, service) in visible.sorted(by: { $0.key < $1.key }) where before[key] != service {
                    reported.queue.append((discovery.onEvent, .found(service)))
                }
                reported.services[observer.id] = visible
            }
            guard !reported.delivering, !reported.queue.isEmpty else { return false }
            reported.delivering = true
            return true
        }
        guard claimed else { return }
        while true {
            let batch = reported.withLockedValue { reported -> [(@Sendable (DiscoveryEvent) -> Void, DiscoveryEvent)] in
                if reported.queue.isEmpty { reported.delivering = false }
                defer { reported.queue.removeAll() }
                return reported.queue
            }
            if batch.isEmpty { return }
            for (deliver, event) in batch { deliver(event) }
        }
    }
}

/// Why the test network refused something.
public enum TestNetworkError: Error, Sendable, CustomStringConvertible, Equatable, PeerTransportConnectError {
    /// Nothing listens at that port of the test network.
    case connectionRefused(port: Int)
    /// The member was killed.
    case killed
    /// A partition held the connection attempt until it healed.
    case partitioned
    /// The network shut down.
    case shutDown
    /// ``TestNetwork/eventually(_:_:)``: the network went quiet and this never became true.
    case neverHappened(String)
    /// ``TestNetwork/eventually(_:_:)``: this never became true, and the network never went
    /// quiet either: it was still busy with `busy` (a sentence fragment) when the last settle gave up.
    case stayedBusy(String, busy: String)

    /// Whether nothing listens at the port dialled, as for a member that was stopped or killed:
    /// a suspended peer refused at every address is taken to have ended, as a process that ended
    /// on a real network is (TCP refuses its port).
    package var isConnectionRefused: Bool {
        if case .connectionRefused = self { true } else { false }
    }

    /// A sentence: what happened, and what to do.
    public var description: String {
        switch self {
        case let .connectionRefused(port): "Nothing listens at port \(port) of the test network: the member was stopped, or never started."
        case .killed: "The member was killed (TestNetwork.kill): it can neither reach nor be reached."
        case .partitioned: "A partition held this connection attempt until it healed; the next attempt can succeed."
        case .shutDown: "The test network shut down."
        case let .neverHappened(what): "The network went quiet without this happening: \(what). Nothing more happens without the clock moving: advance it (TestNetwork.advance(by:)) or check what the test expects."
        case let .stayedBusy(what, busy): "This had not happened: \(what), and the network never went quiet: after \(TestNetwork.maximumSettleRounds) rounds \(busy). Either something keeps it busy at a frozen clock (a handler that never returns, a member that sends without end), or it has more to carry than that (wait for a part of it at a time), or the machine is overloaded: by default every test network shares one event loop thread, so run fewer tests at once or give each network an event loop group of its own."
        }
    }
}
