import ArgumentParser

/// What a measuring side of request/reply takes (`ping`, `nio-ping`): whom to ask, with how
/// much, how often.
struct RoundTripOptions: ParsableArguments {
    @Option(help: "The echo server, as HOST:PORT.")
    var connect: String

    @Option(help: "The payload's size in bytes (of its JSON for ping, of the opaque body for nio-ping).")
    var size = 100

    @Option(help: "How many timed round trips.")
    var count = 20_000

    @Option(help: "How many untimed round trips first.")
    var warmup = 1_000
}
