import ListrKit
import PeerKit
import Synchronization
import Testing

@Suite("ListrWatchers: who gets which change", .timeLimit(.minutes(1)))
struct ListrWatchersTests {
    private func peer(_ id: String) -> Peer { Peer(id: id, name: "client \(id)", isConnected: true) }
    private func change(_ index: Int) -> ListrChange {
        ListrChange(kind: .added, client: "c", index: index, item: Item(title: "item \(index)"))
    }

    @Test("every watcher gets every change published after it was added, in order")
    func fanOut() async throws {
        let sent = SentMessages()
        let watchers = ListrWatchers { message, peer in sent.append(message, to: peer) }
        watchers.publish(change(0))  // before anyone watches: nobody gets it
        try watchers.add(peer("a"))
        try watchers.add(peer("b"))
        for index in 1...20 { watchers.publish(change(index)) }
        await sent.waitFor(count: 40)
        for id in ["a", "b"] {
            let indexes = sent.messages.filter { $0.peer == id }.compactMap { sent -> Int? in
                guard case let .change(change) = sent.message else { return nil }
                return change.index
            }
            #expect(indexes == Array(1...20), "watcher \(id)")
        }
    }

    @Test("a removed watcher, or one whose send fails, gets nothing more")
    func removal() async throws {
        let sent = SentMessages()
        let watchers = ListrWatchers { message, peer in
            if peer.id == "broken" { throw PeerKitError.peerNotConnected(peer: peer.name) }
            sent.append(message, to: peer)
        } dropped: { peer, error in
            sent.drop(peer, error)
        }
        try watchers.add(peer("a"))
        try watchers.add(peer("broken"))
        watchers.publish(change(1))
        await sent.waitFor(count: 1)
        watchers.remove(peer("a"))
        #expect(!watchers.contains(peer("a")))
        await sent.waitUntil { $0.dropped == ["broken"] }
        #expect(watchers.count == 0, "the watcher whose send failed is still there")
        watchers.publish(change(2))
        #expect(sent.messages.count == 1)
    }

    @Test("at most 64 watchers; the next one is refused with a sentence, a returning one is not")
    func watcherLimit() throws {
        let watchers = ListrWatchers { _, _ in }
        for index in 0..<ListrWatchers.maximumWatchers { try watchers.add(peer("\(index)")) }
        #expect(throws: ListrError.tooManyWatchers(limit: 64)) { try watchers.add(peer("one too many")) }
        #expect(throws: Never.self) { try watchers.add(peer("3")) }
        watchers.removeAll()
        #expect(watchers.count == 0)
    }

    @Test("a watcher more than 1,024 changes behind is dropped and told so after what was queued")
    func slowWatcherIsDropped() async throws {
        let gate = Gate()
        let sent = SentMessages()
        let watchers = ListrWatchers { message, peer in
            await gate.wait()
            sent.append(message, to: peer)
        }
        try watchers.add(peer("slow"))
        let total = ListrWatchers.maximumPendingChanges + 10
        for index in 1...total { watchers.publish(change(index)) }
        #expect(!watchers.contains(peer("slow")), "the slow watcher was not dropped")
        await gate.open()
        await sent.waitFor { messages in
            if case .ended? = messages.last?.message { return true }
            return false
        }
        guard case let .ended(ended)? = sent.messages.last?.message else { return }
        // What was queued (1,024 changes, plus the one already being sent if the watcher's task had
        // taken it before the queue filled) went out first, in order, then the end.
        let indexes = sent.messages.dropLast().compactMap { sent -> Int? in
            guard case let .change(change) = sent.message else { return nil }
            return change.index
        }
        #expect([ListrWatchers.maximumPendingChanges, ListrWatchers.maximumPendingChanges + 1].contains(indexes.count))
        #expect(indexes == Array(1...indexes.count))
        #expect(ended.reason.contains("fell more than 1024 changes behind"))
    }
}

/// Holds every caller of ``wait()`` until ``open()``.
actor Gate {
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    func open() {
        isOpen = true
        waiting.forEach { $0.resume() }
        waiting.removeAll()
    }
}
