import NIOCore
import Testing
@testable import PeerKit

/// Two sessions, A sending numbered frames ("m0", "m1", …) to B, over simulated connections that a
/// seeded random run cuts (what is in flight is lost, as in a socket's buffers), replaces while the
/// old one still delivers (a duplicate connection), and, with `endsB`, over which B ends its side
/// of the session while no connection is up (its window ran out first) and starts a new one with a
/// new epoch. No I/O and no clock: each step is one event, drawn from `random`.
///
/// After ``run(steps:)`` and ``settle()``, a test checks what arrived: ``delivered`` (the numbers
/// B's handler saw, in order), ``lost`` (what A's restarts reported lost) and ``restarts``. Every
/// violation a session reports on the way is recorded as an issue.
struct SessionSimulation {
    typealias Session = PeerSession<String>

    /// What travels on a simulated connection.
    enum Wire {
        case resume(SessionFrame.Resume)
        case resend(from: UInt64)
        case frame(String)
        case ack(UInt64)
    }

    /// One simulated connection, one queue per direction; `nextFromA` numbers A's frames at B.
    struct Link {
        var toB: [Wire] = []
        var toA: [Wire] = []
        var nextFromA: UInt64?
        var alive = true
    }

    static let limits = Session.Limits(maximumUnacknowledgedBytes: 400, acknowledgeAfterBytes: 40)

    /// Whether the resumes carry epochs, as PeerKit's do; without, they carry only the count, as
    /// another implementation's may.
    let epochs: Bool
    /// Whether B ends its side at random.
    let endsB: Bool
    var random: SeededGenerator
    var a: Session
    var b: Session
    private var bEpochs = 0
    /// The connections not known closed; the last is the current one, earlier ones may still deliver.
    private(set) var links: [Link] = []
    /// The numbers B delivered, in order.
    private(set) var delivered: [Int] = []
    /// How many numbers A recorded.
    private(set) var sent = 0
    /// The frames A's restarts reported lost, and how many restarts there were.
    private(set) var lost = 0
    private(set) var restarts = 0
    private var bAcknowledgementTimer = false

    init(seed: UInt64, epochs: Bool, endsB: Bool) {
        self.epochs = epochs
        self.endsB = endsB
        random = SeededGenerator(seed: seed)  // JSONDifferentialTests: a failing seed fails again
        a = Session(limits: Self.limits, remoteIncarnation: "b", fingerprint: nil, epoch: "a")
        b = Session(limits: Self.limits, remoteIncarnation: "a", fingerprint: nil, epoch: "b0")
    }

    /// `steps` random events: A records a frame, a link delivers some frames to B or everything to
    /// A, B's acknowledgement timer fires, the current link dies (sometimes with every other one),
    /// a new link replaces it, or B ends its side.
    mutating func run(steps: Int) {
        open()
        for _ in 0..<steps {
            switch random.next() % 100 {
            case 0..<42:
                if case .kept = a.record(ByteBuffer(string: "m\(sent)")) { sent += 1 }
                pump()
            case 42..<72 where !links.isEmpty:
                let index = Int(random.next() % UInt64(links.count))
                if links[index].alive { deliverToB(index, count: Int(random.next() % 20) + 1) }
            case 72..<79 where bAcknowledgementTimer:
                bAcknowledgementTimer = false
                if let n = b.acknowledgementTimerFired(), let last = links.indices.last, links[last].alive { links[last].toA.append(.ack(n)) }
            case 79..<89 where !links.isEmpty:
                let index = Int(random.next() % UInt64(links.count))
                if links[index].alive { deliverToA(index) }
                pump()
            case 89..<92 where links.last?.alive == true:
                cut(every: random.next() % 2 == 0)
                if endsB, links.allSatisfy({ !$0.alive }), random.next() % 3 == 0 { endB() }
            case 92..<94 where links.last?.alive == true:
                open()
            case 94..<97 where links.last?.alive != true:
                open()
            case 97..<100 where endsB && links.allSatisfy({ !$0.alive }):
                endB()
            default:
                break
            }
            #expect(a.unacknowledgedBytes <= Self.limits.maximumUnacknowledgedBytes + 6, "A's tail stays within its bound plus one frame")
            forgetClosed()
        }
    }

    /// A last connection, and everything on it delivered both ways.
    mutating func settle() {
        if links.last?.alive != true { open() }
        for _ in 0..<50 {
            for index in links.indices where links[index].alive {
                deliverToA(index)
                pump()
                deliverToB(index, count: 10_000)
                if let n = b.acknowledgementTimerFired(), index == links.count - 1 { links[index].toA.append(.ack(n)) }
            }
        }
    }

    private func resume(_ session: Session, received: UInt64) -> SessionFrame.Resume {
        epochs ? session.resume(received: received) : SessionFrame.Resume(received: received)
    }

    /// A new connection, the current one from now on: each side sends its resume first on it.
    private mutating func open() {
        var link = Link()
        if let received = a.connected() { link.toB.append(.resume(resume(a, received: received))) }
        if let received = b.connected() { link.toA.append(.resume(resume(b, received: received))) }
        links.append(link)
    }

    /// A writes what its session has not written on the current connection.
    private mutating func pump() {
        guard let last = links.indices.last, links[last].alive else { return }
        let writes = a.takeUnwritten()
        if let from = writes.from { links[last].toB.append(.resend(from: from)) }
        for frame in writes.frames { links[last].toB.append(.frame(String(buffer: frame))) }
    }

    /// The current connection dies, or with `every` every connection (the network dropped them
    /// all): what is in flight on it is lost.
    private mutating func cut(every: Bool) {
        links[links.count - 1].alive = false
        links[links.count - 1].toB = []
        links[links.count - 1].toA = []
        if every {
            for index in links.indices { links[index].alive = false }
        }
        bAcknowledgementTimer = false
        _ = a.suspend()
        _ = b.suspend()
    }

    /// B's window ran out while no connection was up: it ends its side; its next session with A has
    /// a new epoch.
    private mutating func endB() {
        _ = b.end(PeerKitError.sessionExpired(peer: "the peer \"A\"", window: .seconds(30)))
        bEpochs += 1
        b = Session(limits: Self.limits, remoteIncarnation: "a", fingerprint: nil, epoch: "b\(bEpochs)")
        links = []
        bAcknowledgementTimer = false
    }

    /// Connections that closed are forgotten; the last one stays the current one.
    private mutating func forgetClosed() {
        guard links.count > 1 else { return }
        let last = links.removeLast()
        links.removeAll { !$0.alive }
        links.append(last)
    }

    private mutating func deliverToB(_ index: Int, count: Int) {
        for _ in 0..<min(count, links[index].toB.count) {
            let wire = links[index].toB.removeFirst()
            let current = index == links.count - 1
            switch wire {
            case let .resume(resume):
                if current, case .resuming = b.phase {
                    if case let .invalid(reason) = b.peerResumed(resume) { Issue.record("B: \(reason)") }
                } else if case let .invalid(reason) = b.acknowledged(by: resume) {
                    Issue.record("B: \(reason)")
                }
            case let .resend(from):
                links[index].nextFromA = from
            case let .frame(text):
                guard let sequence = links[index].nextFromA else {
                    Issue.record("B: a frame before peerkit.resend")
                    return
                }
                links[index].nextFromA = sequence + 1
                switch b.receive(sequence: sequence, bytes: text.utf8.count) {
                case let .deliver(ack, arm):
                    delivered.append(Int(text.dropFirst()) ?? -1)
                    if let ack, current { links[index].toA.append(.ack(ack)) }
                    if arm { bAcknowledgementTimer = true }
                case .duplicate:
                    break
                case let .gap(reason):
                    Issue.record("B: \(reason)")
                }
            case .ack:
                break
            }
        }
    }

    private mutating func deliverToA(_ index: Int) {
        let current = index == links.count - 1
        for wire in links[index].toA {
            switch wire {
            case let .resume(resume):
                if current, case .resuming = a.phase {
                    switch a.peerResumed(resume) {
                    case .resumed:
                        break
                    case let .restarted(_, frames, _, _):
                        restarts += 1
                        lost += frames
                    case let .invalid(reason):
                        Issue.record("A: \(reason)")
                    }
                } else if case let .invalid(reason) = a.acknowledged(by: resume) {
                    Issue.record("A: \(reason)")
                }
            case let .ack(n):
                if case let .invalid(reason) = a.acknowledged(through: n) { Issue.record("A: \(reason)") }
            default:
                break
            }
        }
        links[index].toA = []
    }
}
