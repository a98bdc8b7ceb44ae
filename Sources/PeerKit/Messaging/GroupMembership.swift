/// Who is in which group, as a value: this transceiver's own groups, and those of each connected
/// peer that speaks the `groups` feature. No I/O and no locks; ``GroupDirectory`` keeps it
/// behind a lock and sends what it says to send.
///
/// The wire carries membership as whole snapshots (``GroupSnapshot``): this side's version goes
/// up with every change, and a peer's snapshot replaces what is known of it unless its version is
/// not newer than one already applied (a late frame from a connection a tie-break retired).
/// Applying one yields the ``Change``s against what was known, which become the transceiver's
/// membership events.
///
/// Everything a peer can make us keep here is bounded by ``Limits``: a snapshot over a limit is a
/// ``Violation``, and the peer is disconnected for it.
struct GroupMembership: Sendable, Equatable {
    /// The limits on group names and on how many groups a peer (or this side) may be in.
    struct Limits: Sendable, Equatable {
        /// The longest group name, in UTF-8 bytes (``PeerConfiguration/maximumGroupNameLength``).
        var maximumGroupNameLength: Int
        /// The most groups one peer may be in (``PeerConfiguration/maximumGroupsPerPeer``).
        var maximumGroupsPerPeer: Int
    }

    /// A peer joined or left a group.
    enum Change: Sendable, Hashable {
        case joined(peerID: String, group: String)
        case left(peerID: String, group: String)
    }

    /// What is wrong with a peer's snapshot, as a sentence fragment; the peer is disconnected.
    struct Violation: Error, Sendable, Hashable {
        var reason: String
        /// Whether a limit was exceeded (rather than the snapshot being malformed).
        var isLimit: Bool
    }

    private struct Remote: Sendable, Equatable {
        var version: UInt64
        var groups: Set<String>
    }

    let limits: Limits
    /// This side's groups.
    private(set) var local: Set<String> = []
    /// Goes up by one with every change of ``local``; sent with each snapshot.
    private(set) var version: UInt64 = 0
    /// What is known of each connected peer that sent a snapshot, by peer ID.
    private var remote: [String: Remote] = [:]

    init(limits: Limits) {
        self.limits = limits
    }

    // MARK: This side

    /// Joins `group`. Returns true when that changed the membership (false when already in it).
    /// - Throws: the reason, as a sentence fragment, when the name is not valid or this side is
    ///   in as many groups as a peer may be.
    mutating func join(_ group: String) throws(Violation) -> Bool {
        if let problem = Self.problem(withName: group, limits: limits) {
            throw Violation(reason: problem, isLimit: false)
        }
        guard !local.contains(group) else { return false }
        guard local.count < limits.maximumGroupsPerPeer else {
            throw Violation(reason: "this transceiver is in \(local.count) groups already, the limit (PeerConfiguration.maximumGroupsPerPeer), which its peers enforce too", isLimit: true)
        }
        local.insert(group)
        version += 1
        return true
    }

    /// Leaves `group`. Returns true when that changed the membership (false when not in it).
    mutating func leave(_ group: String) -> Bool {
        guard local.remove(group) != nil else { return false }
        version += 1
        return true
    }

    /// This side's membership as it is sent to peers.
    var snapshot: GroupSnapshot {
        GroupSnapshot(version: version, groups: local.sorted())
    }

    // MARK: Peers

    /// Applies a snapshot received from `peerID` and returns what changed (sorted by group).
    /// A snapshot whose version is not newer than the last applied one changes nothing.
    /// - Throws: ``Violation`` when the snapshot lists more groups than a peer may be in, or a
    ///   name that is not valid; nothing is applied then.
    mutating func apply(_ snapshot: GroupSnapshot, from peerID: String) throws(Violation) -> [Change] {
        guard snapshot.groups.count <= limits.maximumGroupsPerPeer else {
            throw Violation(reason: "its peerkit.groups lists \(snapshot.groups.count) groups, over the limit of \(limits.maximumGroupsPerPeer) (PeerConfiguration.maximumGroupsPerPeer)", isLimit: true)
        }
        for group in snapshot.groups {
            if let problem = Self.problem(withName: group, limits: limits) {
                let isLimit = group.utf8.count > limits.maximumGroupNameLength
                throw Violation(reason: "its peerkit.groups lists a group whose name \(problem)", isLimit: isLimit)
            }
        }
        let known = remote[peerID]
        if let known, snapshot.version <= known.version { return [] }
        let groups = Set(snapshot.groups)
        let before = known?.groups ?? []
        remote[peerID] = Remote(version: snapshot.version, groups: groups)
        let left = before.subtracting(groups).sorted().map { Change.left(peerID: peerID, group: $0) }
        let joined = groups.subtracting(before).sorted().map { Change.joined(peerID: peerID, group: $0) }
        return left + joined
    }

    /// Forgets a peer that disconnected: it left every group it was in (sorted by group).
    mutating func peerDisconnected(_ peerID: String) -> [Change] {
        guard let known = remote.removeValue(forKey: peerID) else { return [] }
        return known.groups.sorted().map { Change.left(peerID: peerID, group: $0) }
    }

    /// Forgets every peer (the transceiver stopped); this side's groups and version stay.
    mutating func forgetPeers() {
        remote = [:]
    }

    /// The IDs of the peers in `group`.
    func members(of group: String) -> Set<String> {
        Set(remote.compactMap { $0.value.groups.contains(group) ? $0.key : nil })
    }

    /// The groups `peerID` is in, sorted; empty for a peer that sent no snapshot.
    func groups(of peerID: String) -> [String] {
        remote[peerID]?.groups.sorted() ?? []
    }

    // MARK: Names

    /// What is wrong with a group name, as the end of a sentence, or nil when it can be used:
    /// 1 to `maximumGroupNameLength` bytes of UTF-8 without control characters (names end up in
    /// logs and terminals).
    static func problem(withName name: String, limits: Limits) -> String? {
        if name.isEmpty { return "is empty" }
        let length = name.utf8.count
        if length > limits.maximumGroupNameLength {
            return "is \(length) bytes long, over the limit of \(limits.maximumGroupNameLength) (PeerConfiguration.maximumGroupNameLength)"
        }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "contains a control character"
        }
        return nil
    }
}

/// The payload of `peerkit.groups` (feature `groups`): every group the sender is in, and the
/// version of that membership, which goes up by one with each change.
///
///     {"version":3,"groups":["kitchen","lights"]}
struct GroupSnapshot: Codable, Sendable, Hashable {
    var version: UInt64
    var groups: [String]
}
