import NIOCore
@testable import PeerKit

// Drives ConnectionStateMachine with a sequence of events read from the fuzz input. Everything the
// target calls on the machine is in `apply(_:to:)` below, so adapting it to a new API is local:
//   ConnectionStateMachine(configuration:), .Configuration(localHello:heartbeatInterval:peerTimeout:handshakeTimeout:),
//   activated(now:), bytesArrived(now:), frameReceived(_:now:), frameRejected(_:),
//   heartbeat(now:queuedOutboundBytes:readingPaused:heldOfSpentBudget:), closeRequested(_:now:peerLostIt:), transportFailed(_:),
//   channelClosed(error:), isOpen, isEnding; Hello(peerID:name:serviceType:discoveryInfo:);
//   EnvelopeParser.parse.
//
// Input: a sequence of events, each one opcode byte then its operands. Time only moves forward
// (each event advances the clock by an amount from the input). Checks: no crash; the close reason
// is reported at most once; an ending machine never reopens, sends or establishes; once the socket
// closed every event is answered with .none; it is established only after a hello.

/// Reads operands off the input.
struct FuzzInput {
    var bytes: UnsafeBufferPointer<UInt8>.SubSequence

    mutating func byte() -> UInt8? { bytes.popFirst() }

    /// The next `count` bytes (fewer at the end).
    mutating func take(_ count: Int) -> ArraySlice<UInt8> {
        let taken = bytes.prefix(count)
        bytes = bytes.dropFirst(taken.count)
        return ArraySlice(taken)
    }
}

let serviceType = "_fuzz._tcp"
let local = Hello(peerID: "local-peer", name: "local", serviceType: serviceType, discoveryInfo: nil, features: ["resources"])
let configuration = ConnectionStateMachine.Configuration(
    localHello: local,
    heartbeatInterval: .seconds(5),
    peerTimeout: .seconds(15),
    handshakeTimeout: .seconds(10)
)

/// Frame bodies the input can pick by number, so the fuzzer reaches every protocol state quickly.
let cannedFrames: [String] = [
    #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"remote-peer","name":"remote","serviceType":"_fuzz._tcp"}}"#,
    #"{"type":"peerkit.hello","payload":{"protocol":2,"peerID":"remote-peer","name":"remote","serviceType":"_fuzz._tcp"}}"#,
    #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"local-peer","name":"me","serviceType":"_fuzz._tcp"}}"#,
    #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"","name":"x","serviceType":"_other._tcp"}}"#,
    #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"remote-peer","name":"remote","serviceType":"_fuzz._tcp","features":["resources"]}}"#,
    #"{"type":"peerkit.resource.offer","payload":{"transfer":1,"name":"n","size":3}}"#,
    "\u{0}\u{0}\u{0}\u{0}\u{1}abc",
    #"{"type":"peerkit.ping","id":"p1","payload":{}}"#,
    #"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#,
    #"{"type":"peerkit.bye","payload":{"reason":"done"}}"#,
    #"{"type":"peerkit.error","payload":{"reason":"no"}}"#,
    #"{"type":"peerkit.error","replyTo":"r1","payload":{"reason":"no"}}"#,
    #"{"type":"peerkit.future","payload":[]}"#,
    #"{"type":"peerkit.hello","payload":{"protocol":1,"peerID":"remote-peer","name":"remote","serviceType":"_fuzz._tcp","features":["groups"]}}"#,
    #"{"type":"peerkit.groups","payload":{"version":2,"groups":["a","b"]}}"#,
    #"{"type":"AddItemCommand","id":"r7","payload":{"title":"Milk"}}"#,
]

/// What the target has seen of one machine's life.
struct Life {
    /// Whether the machine reported its close reason (a `.close` or `.reportClosed` action).
    var reported = false
    /// Whether the socket closed (`channelClosed`).
    var socketClosed = false
}

func apply(_ input: inout FuzzInput, to machine: inout ConnectionStateMachine, now: inout NIODeadline, life: inout Life) -> Bool {
    guard let opcode = input.byte(), let step = input.byte() else { return false }
    now = now + .milliseconds(Int64(step) * 100)
    let wasEnding = machine.isEnding
    let action: ConnectionStateMachine.Action
    switch opcode % 10 {
    case 0:
        action = machine.activated(now: now)
    case 1, 2:
        // A frame: a canned one, or the next bytes of the input (length from one byte) when they parse.
        machine.bytesArrived(now: now)
        let body: ByteBuffer
        if opcode % 10 == 1 {
            body = ByteBuffer(string: cannedFrames[Int(step) % cannedFrames.count])
        } else {
            body = ByteBuffer(bytes: input.take(Int(input.byte() ?? 0)))
        }
        if ResourceChunkFrame.isChunk(body) {
            // A binary chunk frame (the resources feature), as the decoder and handler route it:
            // its data as a chunk, or refused when it is too short for its header.
            if let chunk = try? ResourceChunkFrame.decode(body) {
                action = machine.chunkReceived(chunk, now: now)
            } else {
                action = machine.frameRejected(.malformedEnvelope("a binary chunk frame is shorter than its 5-byte header"))
            }
            break
        }
        guard let envelope = try? EnvelopeParser.parse(body) else {
            action = machine.frameRejected(.malformedEnvelope("fuzz"))
            break
        }
        action = machine.frameReceived(envelope, now: now)
    case 3:
        let rejection: WireError
        switch step % 3 {
        case 0: rejection = .frameTooLarge(length: Int(step) * 1000, limit: 100)
        case 1: rejection = .truncatedFrame(bytesLeft: Int(step))
        default: rejection = .malformedEnvelope("not JSON")
        }
        action = machine.frameRejected(rejection)
    case 4, 5:
        // Heartbeats, sometimes with an outbox over its limit, with reading paused, or with the
        // transceiver's outbound budget spent.
        let queued = step % 4 == 0 ? Int(step) * 1_000_000 : 0
        action = machine.heartbeat(now: now, queuedOutboundBytes: queued, readingPaused: step % 5 == 0, heldOfSpentBudget: step % 3 == 0 ? queued : 0)
    case 6:
        switch step % 4 {
        case 0: action = machine.closeRequested(.stopped)
        case 1: action = machine.closeRequested(.duplicate)
        // A tie-break's loser that the peer lost: it closes once quiet, on a heartbeat.
        case 2: action = machine.closeRequested(.duplicate, now: now, peerLostIt: true)
        default: action = machine.closeRequested(.failed(.limitExceeded("fuzz")))
        }
        precondition(machine.isEnding, "closeRequested left the machine open")
    case 7:
        action = machine.transportFailed("fuzz")
        precondition(machine.isEnding, "transportFailed left the machine open")
    case 8:
        action = machine.channelClosed(error: step % 2 == 0 ? nil : "fuzz")
        precondition(machine.isEnding, "channelClosed left the machine open")
        life.socketClosed = true
    default:
        machine.bytesArrived(now: now)
        action = .none
    }
    switch action {
    case .close, .reportClosed:
        precondition(!life.reported, "the machine reported its close reason twice: \(action)")
        life.reported = true
    case let .established(hello):
        precondition(!wasEnding, "an ending machine established a connection")
        precondition(machine.isOpen, "established \(hello.peerID) without opening")
    case .renamed, .send:
        precondition(!wasEnding, "an ending machine answered with \(action)")
    case .finishClosing:
        precondition(wasEnding && life.reported, "a machine that had not begun closing asked to close its socket")
    case .deliver, .deliverChunk, .none:
        break
    }
    if wasEnding {
        precondition(machine.isEnding, "an ending machine reopened")
    }
    if machine.isEnding {
        precondition(!machine.isOpen, "a machine is both open and ending")
    }
    if life.socketClosed && opcode % 10 != 8 {
        precondition(action == .none, "a machine whose socket closed answered an event with \(action)")
    }
    return true
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConnectionStateMachine(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    var input = FuzzInput(bytes: UnsafeBufferPointer(start: start, count: count)[...])
    var machine = ConnectionStateMachine(configuration: configuration)
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    var life = Life()
    while apply(&input, to: &machine, now: &now, life: &life) {}
    return 0
}
