import NIOCore

/// The slots of incoming connections that are in their handshake, as a value type: who may take
/// one, who must give one up, and what to log about it. ``ConnectionManager`` keeps one under its
/// lock and performs what it decides (closing an evicted or refused connection, logging) outside.
///
/// A stranger needs no key to open a connection and say nothing (or half a TLS ClientHello), and
/// such a connection holds a slot until the handshake timeout closes it. So that no stranger can
/// hold every slot, and a real client always gets one:
///
/// - **Per source address.** One address (an IPv6 address counts by its /64 prefix, which one
///   host is given whole) holds at most ``Limits/perSource`` pending handshakes; a further
///   connection from it is refused at once. An attacker with one address holds 8 of the 64 slots.
/// - **In total, by eviction.** When all ``Limits/total`` slots are taken, a new connection from an
///   address with fewer pending handshakes than the busiest is not refused: the oldest pending
///   handshake of the address with the most pending ones is closed to make room. A client from an
///   address with fewer pending handshakes than the busiest address is never the one evicted, so
///   an attacker must use more addresses than there are slots per address to push a client out,
///   and even then evicts the oldest handshakes first. A new connection from an address that
///   already holds as many as the busiest is closed at once: evicting for it would swap one of an
///   attacker's stalled handshakes for another, and each swap costs a connection set up and one
///   torn down, which slows the accepting of everyone queued behind (2,000 stalled connections
///   from 16 addresses re-opened as fast as they close: 16 addresses × 4 slots, all churn).
///
/// A connection from an unknown address (a test transport's) counts only against the total.
///
/// Refusals, evictions and failed handshakes of strangers are logged once per episode: the first
/// one at once (``Report/episodeStarted(_:)``), then one line with counts per ``summaryInterval``
/// while they go on (``summary()``), and nothing when a whole interval passes without any.
struct HandshakeSlots<ID: Hashable, Handle> {
    /// How many handshakes may be pending.
    struct Limits: Equatable, Sendable {
        /// In total (``PeerConfiguration/maximumPendingHandshakes``).
        var total: Int
        /// From one source address (``PeerConfiguration/maximumPendingHandshakesPerAddress``).
        var perSource: Int
    }

    /// What to do with a new connection.
    enum Decision {
        /// It has a slot.
        case admit
        /// It has a slot; close `Handle`, the oldest pending handshake of the busiest address, to
        /// make room.
        case admitEvicting(Handle)
        /// Its address already has ``Limits/perSource`` pending handshakes: close it.
        case refuse
    }

    /// What to log after an event.
    enum Report: Equatable {
        /// The first refusal, eviction or failure of an episode: log this line, and ask for the
        /// ``summary()`` after ``summaryInterval``.
        case episodeStarted(String)
    }

    /// How often an episode's counts are logged while it goes on.
    static var summaryInterval: TimeAmount { .seconds(summarySeconds) }
    private static var summarySeconds: Int64 { 10 }

    fileprivate struct Pending {
        var id: ID
        var handle: Handle
        var since: NIODeadline
    }

    /// What happened since the episode's last line.
    struct Tally: Equatable {
        var evicted = 0
        var refused = 0
        var failed = 0
        /// Refusals, evictions and failures by source address (at most ``maximumSources`` kept).
        var bySource: [String: Int] = [:]
        /// Failures by what went wrong (at most ``maximumReasons`` kept).
        var byReason: [String: Int] = [:]

        static var maximumSources: Int { 64 }
        static var maximumReasons: Int { 8 }

        var isEmpty: Bool { evicted == 0 && refused == 0 && failed == 0 }

        mutating func count(_ source: String) {
            if bySource[source] != nil || bySource.count < Self.maximumSources { bySource[source, default: 0] += 1 }
        }
    }

    let limits: Limits
    /// Pending handshakes by source, oldest first (each list at most ``Limits/perSource`` long).
    private var bySource: [String: [Pending]] = [:]
    /// The source of each pending handshake.
    private var sourceOf: [ID: String] = [:]
    /// Evicted connections not closed yet: their close is not a failed handshake.
    private var evicted: Set<ID> = []
    /// Numbers the sources of connections from unknown addresses, each a source of its own.
    private var unknownSources = 0
    /// The episode in progress: what happened since its last line.
    private(set) var tally: Tally?

    init(limits: Limits) {
        self.limits = limits
    }

    /// How many handshakes are pending.
    var count: Int { sourceOf.count }

    /// Whether `id` holds a slot.
    func contains(_ id: ID) -> Bool { sourceOf[id] != nil }

    /// How many handshakes from `source` are pending.
    func pending(from source: String) -> Int { bySource[source]?.count ?? 0 }

    /// A new connection `id` from `source` (nil: an unknown address) at `now`: whether it gets a
    /// slot, and whom it evicts. Also returns the line to log when this starts an episode.
    mutating func admit(_ id: ID, handle: Handle, from source: String?, now: NIODeadline) -> (Decision, Report?) {
        let key: String
        if let source {
            key = source
            if pending(from: source) >= limits.perSource {
                let perSource = limits.perSource
                return (.refuse, note(source) { $0.refused += 1 } first: {
                    "Refusing new connections from \(source): \(perSource) of its connections are in their handshake, the limit per address (PeerConfiguration.maximumPendingHandshakesPerAddress). Connections from other addresses are still accepted; counts follow every \(Self.summarySeconds) s while this goes on."
                })
            }
        } else {
            unknownSources += 1
            key = "\u{0}unknown \(unknownSources)"
        }
        var decision = Decision.admit
        var report: Report?
        if count >= limits.total, let victim = oldestOfBusiestSource() {
            // Only a connection from an address holding fewer pending handshakes than the busiest
            // evicts: one from an address that holds as many (an attacker's own re-opened
            // connection) would only swap one stalled handshake for another, at the cost of a
            // whole connection set up and another torn down. It is closed at once instead.
            let held = pending(from: key)
            if held >= victim.count {
                let total = limits.total
                return (.refuse, note(key) { $0.refused += 1 } first: {
                    "Refusing new connections from \(Self.describe(key)): all \(total) slots (PeerConfiguration.maximumPendingHandshakes) are held by connections in their handshake, and \(held) of them are its own, as many as any address holds. A connection from an address with fewer evicts the oldest one of the busiest. Counts follow every \(Self.summarySeconds) s while this goes on."
                })
            }
            remove(victim.id)
            evicted.insert(victim.id)
            decision = .admitEvicting(victim.handle)
            let busiest = Self.describe(victim.source)
            let total = limits.total
            report = note(victim.source) { $0.evicted += 1 } first: {
                "Evicting pending handshakes: all \(total) slots (PeerConfiguration.maximumPendingHandshakes) are held by connections in their handshake, so the oldest one of the busiest address (\(busiest)) is closed to admit each new connection. Counts follow every \(Self.summarySeconds) s while this goes on."
            }
        }
        sourceOf[id] = key
        bySource[key, default: []].append(Pending(id: id, handle: handle, since: now))
        return (decision, report)
    }

    /// The handshake of `id` completed: its slot is free.
    mutating func completed(_ id: ID) {
        remove(id)
    }

    /// The connection `id` closed: its slot (if it still held one) is free. Returns whether it
    /// was evicted.
    @discardableResult
    mutating func closed(_ id: ID) -> Bool {
        remove(id)
        return evicted.remove(id) != nil
    }

    /// Whether `id` was evicted (and has not been reported closed yet).
    func wasEvicted(_ id: ID) -> Bool { evicted.contains(id) }

    /// A stranger's connection from `source` failed its handshake (timed out, closed, spoke
    /// nonsense): `reason` says how, without naming the peer (failures are counted by it), and
    /// `sentence`, when given, is the whole error to log if this starts an episode. Returns the
    /// line to log when this starts an episode.
    mutating func failed(from source: String?, reason: String, sentence: String? = nil) -> Report? {
        let source = source ?? "an unknown address"
        return note(source) { tally in
            tally.failed += 1
            if tally.byReason[reason] != nil || tally.byReason.count < Tally.maximumReasons { tally.byReason[reason, default: 0] += 1 }
        } first: {
            let further = "Further handshake failures are counted, with one line every \(Self.summarySeconds) s while they go on."
            if let sentence { return sentence + " " + further }
            return "A connection from \(source) failed its handshake: \(reason). " + further
        }
    }

    /// Called ``summaryInterval`` after an episode started, and again after each line it returns:
    /// the line with the counts since the last one, or nil when nothing happened since (the
    /// episode is over, and the next event starts another).
    mutating func summary() -> String? {
        guard let current = tally else { return nil }
        guard !current.isEmpty else {
            tally = nil
            return nil
        }
        tally = Tally()
        return Self.sentence(current)
    }

    // MARK: Helpers

    /// Counts an event from `source` in the episode; starts one (returning `first()`'s line) when
    /// none is in progress.
    private mutating func note(_ source: String, _ update: (inout Tally) -> Void, first: () -> String) -> Report? {
        guard var current = tally else {
            // The first event is told by its own line; the summary counts what follows it.
            tally = Tally()
            return .episodeStarted(first())
        }
        update(&current)
        current.count(source)
        tally = current
        return nil
    }

    /// The oldest pending handshake of the source with the most pending ones (of those, the one
    /// whose oldest is oldest).
    private func oldestOfBusiestSource() -> (id: ID, handle: Handle, source: String, count: Int)? {
        var best: (source: String, pending: Pending, count: Int)?
        for (source, list) in bySource {
            guard let oldest = list.first else { continue }
            if let current = best, list.count < current.count || (list.count == current.count && oldest.since >= current.pending.since) { continue }
            best = (source, oldest, list.count)
        }
        return best.map { ($0.pending.id, $0.pending.handle, $0.source, $0.count) }
    }

    private mutating func remove(_ id: ID) {
        guard let source = sourceOf.removeValue(forKey: id) else { return }
        bySource[source]?.removeAll { $0.id == id }
        if bySource[source]?.isEmpty == true { bySource[source] = nil }
    }

    private static func describe(_ source: String) -> String {
        source.hasPrefix("\u{0}") ? "an unknown address" : source
    }

    /// "In the last 10 s, 1,234 connections in their handshake were evicted, …; most from 127.0.0.2 (1,200)."
    static func sentence(_ tally: Tally) -> String {
        var parts: [String] = []
        if tally.evicted > 0 {
            parts.append("\(count(tally.evicted, "connection")) stalled in their handshake \(tally.evicted == 1 ? "was" : "were") evicted to make room for new ones (PeerConfiguration.maximumPendingHandshakes)")
        }
        if tally.refused > 0 {
            parts.append("\(count(tally.refused, "connection")) \(tally.refused == 1 ? "was" : "were") refused because their address had too many handshakes pending (PeerConfiguration.maximumPendingHandshakesPerAddress)")
        }
        if tally.failed > 0 {
            let reasons = tally.byReason.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(3).map { "\(grouped($0.value)): \($0.key)" }
            parts.append("\(count(tally.failed, "connection")) failed their handshake (\(reasons.isEmpty ? "timed out, closed or spoke nonsense" : reasons.joined(separator: "; ")))")
        }
        var text = "In the last \(summarySeconds) s, " + parts.joined(separator: ", ")
        let sources = tally.bySource.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        if let (source, number) = sources.first {
            let others = sources.count - 1
            text += "; most from \(describe(source)) (\(grouped(number)))"
            if others > 0 { text += ", the rest from \(others == 1 ? "1 other address" : "\(grouped(others))\(sources.count == Tally.maximumSources ? " or more" : "") other addresses")" }
        }
        return text + "."
    }

    private static func count(_ number: Int, _ noun: String) -> String {
        "\(grouped(number)) \(noun)\(number == 1 ? "" : "s")"
    }

    /// 1234567 as "1,234,567".
    static func grouped(_ number: Int) -> String {
        let digits = String(number.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return number < 0 ? "-" + result : result
    }

    // MARK: Source addresses

    /// The source that `address` counts under: an IPv4 address (also when mapped into IPv6), an
    /// IPv6 address's /64 prefix, or nil for an address without a host (a Unix socket, a test
    /// transport's channel).
    static func source(of address: SocketAddress?) -> String? {
        switch address {
        case .v4?:
            return address?.ipAddress
        case let .v6(v6)?:
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            guard bytes.count == 16 else { return address?.ipAddress }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        default:
            return nil
        }
    }
}

extension HandshakeSlots: Sendable where ID: Sendable, Handle: Sendable {}
extension HandshakeSlots.Pending: Sendable where ID: Sendable, Handle: Sendable {}
extension HandshakeSlots.Decision: Sendable where Handle: Sendable {}
extension HandshakeSlots.Decision: Equatable where Handle: Equatable {}
extension HandshakeSlots.Tally: Sendable {}
