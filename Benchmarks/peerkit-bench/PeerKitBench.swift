import ArgumentParser

/// The PeerKit side of `make bench`: each subcommand is one process of one measurement.
///
/// Processes that serve (`sink`, `echo`, `discovery-peer`) print `{"event":"ready",...}` on
/// stdout once they listen; the process that measures prints one JSON object with the result.
/// `scripts/bench` (through `Benchmarks/harness/bench.py`) starts them in pairs and reads both.
@main
struct PeerKitBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peerkit-bench",
        abstract: "PeerKit benchmark processes: one-way throughput, request/reply, fan-out, discovery, JSON floor, the NIO floors.",
        subcommands: [Sink.self, Source.self, Echo.self, Ping.self, DiscoveryPeer.self, Join.self, JSONFloor.self,
                      ResourceSink.self, ResourceSource.self, NIOMesh.self, NIOEcho.self, NIOPing.self]
    )
}
