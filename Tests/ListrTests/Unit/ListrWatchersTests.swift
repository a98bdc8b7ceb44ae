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

    @Test("a watcher that does not keep up is dropped once its queue would pass its byte limit: what was queued is freed, the drop is reported, and the watcher is told why")
    func slowWatcherIsDropped() async throws {
        let gate = Gate()
        let sent = SentMessages()
        let errors = Mutex<[ListrError]>([])
        let limit = 64 * 1024
        let watchers = ListrWatchers(maximumQueuedBytes: limit) { message, peer in
            await gate.wait()
            sent.append(message, to: peer)
        } dropped: { peer, error in
            if let error = error as? ListrError { errors.withLock { $0.append(error) } }
            sent.drop(peer, error)
        }
        try watchers.add(peer("slow"))
        try watchers.add(peer("other"))
        // Changes of about 4 KiB each: 16 fill the 64 KiB queue, whatever their count.
        let title = String(repeating: "x", count: 4000)
        let big = { (index: Int) in ListrChange(kind: .added, client: "c", index: index, item: Item(title: title)) }
        let perChange = ListrWatchers.queuedBytes(of: big(1))
        let fitting = limit / perChange
        for index in 1...(fitting + 2) { watchers.publish(big(index)) }
        #expect(!watchers.contains(peer("slow")), "the slow watcher was not dropped")
        #expect(!watchers.contains(peer("other")), "both watchers wait on the gate, so both fell behind")
        let dropped = errors.withLock { $0 }
        #expect(dropped.count == 2)
        for error in dropped {
            guard case let .watcherFellBehind(queuedBytes, reported) = error else {
                Issue.record("dropped with \(error), not watcherFellBehind")
                continue
            }
            #expect(reported == limit)
            #expect(queuedBytes > limit && queuedBytes <= limit + perChange)
        }
        await gate.open()
        await sent.waitFor { messages in
            ["slow", "other"].allSatisfy { id in
                messages.contains { if $0.peer == id, case .ended = $0.message { return true } else { return false } }
            }
        }
        for id in ["slow", "other"] {
            let mine = sent.messages.filter { $0.peer == id }
            // At most the change already being sent when the queue overflowed went out (what
            // was queued was freed), then the end, with the sentence.
            #expect(mine.count <= 2, "\(id) got \(mine.count) messages")
            guard case let .ended(ended)? = mine.last?.message else {
                Issue.record("\(id) was not told that its watch ended")
                continue
            }
            #expect(ended.reason.contains("listrd stopped sending changes to this watcher because it fell behind"))
            #expect(ended.reason.contains("more than the \(limit) bytes listrd keeps for one watcher"))
            #expect(ended.reason.contains("Watch again"))
        }
        // Dropped for good: later changes reach nobody.
        let before = sent.messages.count
        watchers.publish(big(99))
        #expect(sent.messages.count == before)
    }

    @Test("the byte limit counts bytes, not changes: thousands of small changes queue for a watcher that has not read yet")
    func smallChangesQueue() async throws {
        let gate = Gate()
        let sent = SentMessages()
        let watchers = ListrWatchers { message, peer in
            await gate.wait()
            sent.append(message, to: peer)
        }
        try watchers.add(peer("a"))
        let count = ListrLimits.maximumQueuedChangeBytesPerWatcher / ListrWatchers.queuedBytes(of: change(1000)) - 1
        #expect(count > 1024)
        for index in 1...count { watchers.publish(change(index)) }
        #expect(watchers.contains(peer("a")))
        await gate.open()
        await sent.waitFor(count: count)
        let indexes = sent.messages.compactMap { sent -> Int? in
            guard case let .change(change) = sent.message else { return nil }
            return change.index
        }
        #expect(indexes == Array(1...count))
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
