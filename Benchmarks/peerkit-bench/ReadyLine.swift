/// The line a serving process prints once it listens.
struct ReadyLine: Encodable {
    let event = "ready"
    /// The port of the first (or only) transceiver.
    let port: Int
    /// The ports of all transceivers, for a fan-out sink.
    let ports: [Int]
}
