import NIOCore
import Testing
@testable import PeerKit

@Suite("Group membership as values")
struct GroupMembershipTests {
    let limits = GroupMembership.Limits(maximumGroupNameLength: 16, maximumGroupsPerPeer: 3)

    @Test("joining and leaving change the snapshot and bump its version once per change")
    func localChanges() throws {
        var membership = GroupMembership(limits: limits)
        #expect(membership.snapshot == GroupSnapshot(version: 0, groups: []))
        let joinedLights = try membership.join("lights")
        let joinedKitchen = try membership.join("kitchen")
        let joinedAgain = try membership.join("kitchen")
        #expect(joinedLights && joinedKitchen && !joinedAgain)
        #expect(membership.snapshot == GroupSnapshot(version: 2, groups: ["kitchen", "lights"]))
        let leftOnce = membership.leave("lights")
        let leftTwice = membership.leave("lights")
        #expect(leftOnce && !leftTwice)
        #expect(membership.snapshot == GroupSnapshot(version: 3, groups: ["kitchen"]))
    }

    @Test("names that are empty, too long or hold control characters are refused, and so is one group too many")
    func localLimits() throws {
        var membership = GroupMembership(limits: limits)
        #expect(throws: GroupMembership.Violation(reason: "is empty", isLimit: false)) { try membership.join("") }
        #expect(throws: GroupMembership.Violation(reason: "is 17 bytes long, over the limit of 16 (PeerConfiguration.maximumGroupNameLength)", isLimit: false)) {
            try membership.join(String(repeating: "g", count: 17))
        }
        #expect(throws: GroupMembership.Violation(reason: "contains a control character", isLimit: false)) { try membership.join("a\nb") }
        for group in ["a", "b", "c"] { _ = try membership.join(group) }
        #expect(throws: GroupMembership.Violation.self) { try membership.join("d") }
        let rejoined = try membership.join("a")
        #expect(!rejoined, "joining a group it is in is not one too many")
        #expect(membership.snapshot.version == 3)
    }

    @Test("a peer's first snapshot makes it join each of its groups; a later one yields only the differences")
    func remoteSnapshots() throws {
        var membership = GroupMembership(limits: limits)
        let first = try membership.apply(GroupSnapshot(version: 4, groups: ["b", "a"]), from: "P")
        #expect(first == [
            .joined(peerID: "P", group: "a"), .joined(peerID: "P", group: "b"),
        ])
        #expect(membership.members(of: "a") == ["P"])
        let second = try membership.apply(GroupSnapshot(version: 5, groups: ["b", "c"]), from: "P")
        #expect(second == [
            .left(peerID: "P", group: "a"), .joined(peerID: "P", group: "c"),
        ])
        #expect(membership.groups(of: "P") == ["b", "c"])
        #expect(membership.members(of: "a").isEmpty)
    }

    @Test("a snapshot not newer than the last one applied (a retired connection's) changes nothing")
    func staleSnapshot() throws {
        var membership = GroupMembership(limits: limits)
        _ = try membership.apply(GroupSnapshot(version: 7, groups: ["new"]), from: "P")
        let older = try membership.apply(GroupSnapshot(version: 6, groups: ["old"]), from: "P")
        let same = try membership.apply(GroupSnapshot(version: 7, groups: []), from: "P")
        #expect(older.isEmpty && same.isEmpty)
        #expect(membership.groups(of: "P") == ["new"])
    }

    @Test("a snapshot over a limit is a violation and applies nothing")
    func remoteLimits() throws {
        var membership = GroupMembership(limits: limits)
        _ = try membership.apply(GroupSnapshot(version: 1, groups: ["a"]), from: "P")
        #expect(throws: GroupMembership.Violation(reason: "its peerkit.groups lists 4 groups, over the limit of 3 (PeerConfiguration.maximumGroupsPerPeer)", isLimit: true)) {
            try membership.apply(GroupSnapshot(version: 2, groups: ["a", "b", "c", "d"]), from: "P")
        }
        #expect(throws: GroupMembership.Violation(reason: "its peerkit.groups lists a group whose name is 17 bytes long, over the limit of 16 (PeerConfiguration.maximumGroupNameLength)", isLimit: true)) {
            try membership.apply(GroupSnapshot(version: 2, groups: [String(repeating: "x", count: 17)]), from: "P")
        }
        #expect(throws: GroupMembership.Violation(reason: "its peerkit.groups lists a group whose name is empty", isLimit: false)) {
            try membership.apply(GroupSnapshot(version: 2, groups: [""]), from: "P")
        }
        #expect(membership.groups(of: "P") == ["a"])
    }

    @Test("a peer that disconnects leaves all its groups; one that sent nothing leaves none")
    func disconnect() throws {
        var membership = GroupMembership(limits: limits)
        _ = try membership.apply(GroupSnapshot(version: 1, groups: ["a", "b"]), from: "P")
        _ = try membership.apply(GroupSnapshot(version: 9, groups: ["a"]), from: "Q")
        let gone = membership.peerDisconnected("P")
        let goneAgain = membership.peerDisconnected("P")
        let never = membership.peerDisconnected("never-said")
        #expect(gone == [.left(peerID: "P", group: "a"), .left(peerID: "P", group: "b")])
        #expect(goneAgain.isEmpty && never.isEmpty)
        #expect(membership.members(of: "a") == ["Q"])
        // After a reconnect any version counts again (the peer may have restarted its count).
        let back = try membership.apply(GroupSnapshot(version: 1, groups: ["z"]), from: "P")
        #expect(back == [.joined(peerID: "P", group: "z")])
    }

    @Test("the peerkit.groups payload encodes and decodes with PeerKit's codec")
    func payloadCodec() throws {
        let snapshot = GroupSnapshot(version: UInt64.max, groups: ["küche", "a\"b"])
        let encoded = MessageCodec.encodeControl(type: EnvelopeType.groups, snapshot)
        #expect(String(buffer: encoded.payload) == #"{"version":18446744073709551615,"groups":["küche","a\"b"]}"#)
        let envelope = Envelope(type: EnvelopeType.groups, payload: encoded.payload)
        #expect(try envelope.decodePayload(GroupSnapshot.self) == snapshot)
    }
}
