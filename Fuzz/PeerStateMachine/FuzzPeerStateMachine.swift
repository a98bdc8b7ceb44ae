import NIOCore
@testable import PeerKit

// Drives PeerStateMachine (one peer's life above its connections) with a sequence of events read
// from the fuzz input: connections established and closed in any order and direction, tie-breaks,
// switches, grace timers (stale ones too), frames routed, held frames taken, senders waiting,
// retired connections finishing, abandon and stop. The API it uses:
//   PeerStateMachine<Connection, Waiter>(), established(_:direction:localPeerID:remotePeerID:),
//   closed(_:byeDuplicate:), finished(_:), graceExpired(generation:), route(_:limit:),
//   takeHeldFrames(for:), wait(_:), destination, abandon(), stop(), current, isConnected,
//   isSwitching, heldBytes, retiring, holdsInbound(from:).
//
// Checks, after every event: no crash; held frames come out in the order they went in, each once,
// and are dropped only when the peer is disconnected (or stops); what is held stays within the
// limit plus one frame; every waiter is handed back exactly once (by the end of the input, after
// stop()); the current connection is never one that is retiring, nor one that closed; a peer
// with a current connection is connected.

/// Reads operands off the input.
struct FuzzInput {
    var bytes: UnsafeBufferPointer<UInt8>.SubSequence

    mutating func byte() -> UInt8? { bytes.popFirst() }
}

final class Connection {
    let index: Int
    init(_ index: Int) { self.index = index }
}

/// The largest frame the target routes, and the hold's limit.
let maximumFrame = 64
let limit = 256

struct Model {
    /// Frame numbers held, oldest first, as the machine should hand them out.
    var held: [Int] = []
    var nextFrame = 0
    /// Waiters handed to the machine and not yet handed back.
    var waiting: Set<Int> = []
    var nextWaiter = 0
    /// Connections that closed (their `closed` event came).
    var closed: Set<Int> = []
    /// The generations of switches the machine started.
    var generations: [Int] = []

    mutating func handedBack(_ waiters: [Int]) {
        for waiter in waiters {
            precondition(waiting.remove(waiter) != nil, "waiter \(waiter) handed back twice or never waited")
        }
    }
}

func frame(_ number: Int, length: Int) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeInteger(UInt32(number))
    buffer.writeRepeatingByte(0, count: max(0, length - 4))
    return buffer
}

func number(of frame: ByteBuffer) -> Int {
    Int(frame.getInteger(at: frame.readerIndex, as: UInt32.self) ?? .max)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPeerStateMachine(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    var input = FuzzInput(bytes: UnsafeBufferPointer(start: start, count: count)[...])
    var machine = PeerStateMachine<Connection, Int>()
    var model = Model()
    // A fresh pool of connections: each index is one connection object for the whole run.
    let pool = (0..<6).map(Connection.init)
    let localIsSmaller = (input.byte() ?? 0) % 2 == 0
    let (localID, remoteID) = localIsSmaller ? ("a", "b") : ("b", "a")

    while let opcode = input.byte(), let operand = input.byte() {
        let connection = pool[Int(operand) % pool.count]
        switch opcode % 10 {
        case 0:
            // Established (a connection only completes its handshake once, and not after closing).
            guard !model.closed.contains(connection.index), machine.current !== connection,
                  !machine.retiring.contains(where: { $0 === connection }) else { break }
            let direction: TieBreak.Direction = operand & 0x80 == 0 ? .inbound : .outbound
            switch machine.established(connection, direction: direction, localPeerID: localID, remotePeerID: remoteID) {
            case .connected:
                precondition(machine.current === connection)
            case let .retire(loser, _):
                precondition(machine.current !== loser, "the loser is still current")
            case let .switched(waiters, _):
                model.handedBack(waiters)
            }
        case 1:
            guard !model.closed.contains(connection.index) else { break }
            model.closed.insert(connection.index)
            let wasCurrent = machine.current === connection
            switch machine.closed(connection, byeDuplicate: operand & 0x40 != 0) {
            case .ignored:
                precondition(!wasCurrent, "the current connection closed and nothing changed")
            case let .switching(generation):
                model.generations.append(generation)
                precondition(machine.isSwitching && machine.isConnected)
            case .disconnected:
                precondition(!machine.isConnected)
                model.held = []
            }
        case 2:
            // The grace timer of a switch, or of an earlier one.
            let generation = model.generations.isEmpty ? 0 : model.generations[Int(operand) % model.generations.count]
            if let waiters = machine.graceExpired(generation: generation) {
                model.handedBack(waiters)
                precondition(!machine.isConnected)
                model.held = []
            }
        case 3, 4:
            let length = 4 + Int(operand) % (maximumFrame - 4)
            let before = machine.heldBytes
            switch machine.route(frame(model.nextFrame, length: length), limit: limit) {
            case let .send(to):
                precondition(to === machine.current)
                precondition(!model.closed.contains(to.index), "a frame was routed to a closed connection")
            case .held:
                model.held.append(model.nextFrame)
                precondition(machine.heldBytes == before + length)
            case .full:
                precondition(before + length > limit)
            case .notConnected:
                precondition(!machine.isConnected)
            }
            model.nextFrame += 1
            precondition(machine.heldBytes <= limit + maximumFrame, "the hold grew past its limit plus one frame")
        case 5:
            let (frames, waiters) = machine.takeHeldFrames(for: connection)
            model.handedBack(waiters)
            let numbers = frames.map(number(of:))
            precondition(numbers == Array(model.held.prefix(numbers.count)), "held frames out of order: \(numbers) vs \(model.held)")
            model.held.removeFirst(numbers.count)
        case 6:
            let waiter = model.nextWaiter
            model.nextWaiter += 1
            if machine.wait(waiter) == .waiting { model.waiting.insert(waiter) }
        case 7:
            _ = machine.finished(connection)
        case 8:
            let waiters = machine.abandon()
            if !machine.isConnected { model.held = [] }
            model.handedBack(waiters)
        default:
            if case let .connection(to) = machine.destination { precondition(to === machine.current) }
            _ = machine.holdsInbound(from: connection)
        }
        // Invariants after every event.
        if let current = machine.current {
            precondition(machine.isConnected)
            precondition(!model.closed.contains(current.index), "the current connection has closed")
            precondition(!machine.retiring.contains(where: { $0 === current }), "the current connection is retiring")
        }
        if !machine.isConnected { precondition(machine.heldBytes == 0) }
    }
    model.handedBack(machine.stop())
    precondition(model.waiting.isEmpty, "waiters never handed back: \(model.waiting)")
    return 0
}
