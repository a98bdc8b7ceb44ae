/// Round-trip times and losses, summarised as ping does: min/avg/max/mdev.
struct RoundTripStatistics: Sendable, Equatable {
    private(set) var times: [Double] = []
    var lost = 0

    mutating func add(_ milliseconds: Double) { times.append(milliseconds) }

    var received: Int { times.count }
    var sent: Int { times.count + lost }
    var minimum: Double { times.min() ?? 0 }
    var maximum: Double { times.max() ?? 0 }
    var average: Double { times.isEmpty ? 0 : times.reduce(0, +) / Double(times.count) }
    /// The mean absolute deviation from the average, ping's "mdev".
    var deviation: Double { times.isEmpty ? 0 : times.map { abs($0 - average) }.reduce(0, +) / Double(times.count) }
    var lossPercent: Double { sent == 0 ? 0 : Double(lost) * 100 / Double(sent) }

    var summary: String {
        let round = { (value: Double) in (value * 1000).rounded() / 1000 }
        return "\(sent) probes sent, \(received) answered, \(round(lossPercent))% lost; round trip min/avg/max/mdev = \(round(minimum))/\(round(average))/\(round(maximum))/\(round(deviation)) ms"
    }

    var object: [String: Any] {
        ["sent": sent, "received": received, "lossPercent": lossPercent, "minMilliseconds": minimum, "avgMilliseconds": average, "maxMilliseconds": maximum, "mdevMilliseconds": deviation]
    }
}
