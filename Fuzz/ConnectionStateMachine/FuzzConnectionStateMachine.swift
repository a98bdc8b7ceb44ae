import NIOCore
@testable import PeerKit

// Drives ConnectionStateMachine with a sequence of events read from the fuzz input. Everything the
// target calls on the machine is in `apply(_:to:)` below, so adapting it to a new API is local:
//   ConnectionStateMachine(configuration:), .Configuration(localHello:heartbeatInterval:peerTimeout:handshakeTimeout:),
//   activated(now:), frameReceived(_:now:), frameRejected(_:), heartbeat(now:), closeRequested(reason:),
//   isClosed, remoteHello; Hello(peerID:name:serviceType:discoveryInfo:); EnvelopeParser.parse.
//
// Input: a sequence of events, each one opcode byte then its operands. Time only moves forward
// (each event advances the clock by an amount from the input). Checks: no crash; once closed the
// machine stays closed and answers every event with .none; it is established only after a hello.

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
let local = Hello(peerID: "local-peer", name: "local", serviceType: serviceType, discoveryInfo: nil)
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
    #"{"type":"peerkit.ping","id":"p1","payload":{}}"#,
    #"{"type":"peerkit.pong","replyTo":"ping-1","payload":{}}"#,
    #"{"type":"peerkit.bye","payload":{"reason":"done"}}"#,
    #"{"type":"peerkit.error","payload":{"reason":"no"}}"#,
    #"{"type":"peerkit.error","replyTo":"r1","payload":{"reason":"no"}}"#,
    #"{"type":"peerkit.future","payload":[]}"#,
    #"{"type":"AddItemCommand","id":"r7","payload":{"title":"Milk"}}"#,
]

func apply(_ input: inout FuzzInput, to machine: inout ConnectionStateMachine, now: inout NIODeadline) -> Bool {
    guard let opcode = input.byte(), let step = input.byte() else { return false }
    now = now + .milliseconds(Int64(step) * 100)
    let wasClosed = machine.isClosed
    let action: ConnectionStateMachine.Action
    switch opcode % 7 {
    case 0:
        action = machine.activated(now: now)
    case 1, 2:
        // A frame: a canned one, or the next bytes of the input (length from one byte) when they parse.
        let body: ByteBuffer
        if opcode % 7 == 1 {
            body = ByteBuffer(string: cannedFrames[Int(step) % cannedFrames.count])
        } else {
            body = ByteBuffer(bytes: input.take(Int(input.byte() ?? 0)))
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
        action = machine.heartbeat(now: now)
    default:
        action = machine.closeRequested(reason: step % 2 == 0 ? nil : "fuzz")
        precondition(machine.isClosed, "closeRequested left the machine open")
    }
    if wasClosed {
        precondition(action == .none, "a closed machine answered an event with \(action)")
        precondition(machine.isClosed, "a closed machine reopened")
    }
    if case let .established(hello) = action {
        precondition(machine.remoteHello == hello, "established without recording the remote hello")
    }
    return true
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConnectionStateMachine(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    var input = FuzzInput(bytes: UnsafeBufferPointer(start: start, count: count)[...])
    var machine = ConnectionStateMachine(configuration: configuration)
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    while apply(&input, to: &machine, now: &now) {}
    return 0
}
