/// Latency samples in microseconds and their percentiles.
struct LatencySummary: Encodable {
    let roundTrips: Int
    let p50us: Double
    let p99us: Double
    let meanus: Double
    let minus: Double
    let maxus: Double
    /// start() → the peer connected (TCP, TLS when on, and the hello exchange), in ms, when measured.
    var connectMs: Double?

    /// Summarises `samples` (microseconds, any order, at least one).
    init(samples: [Double]) {
        let sorted = samples.sorted()
        roundTrips = sorted.count
        p50us = sorted[sorted.count / 2]
        p99us = sorted[min(Int(Double(sorted.count) * 0.99), sorted.count - 1)]
        meanus = sorted.reduce(0, +) / Double(sorted.count)
        minus = sorted[0]
        maxus = sorted[sorted.count - 1]
    }
}
