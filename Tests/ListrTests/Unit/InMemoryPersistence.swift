import ListrKit
import Synchronization

/// Persistence in memory, for handler tests without I/O; can be told to fail saves.
final class InMemoryPersistence: ItemPersistence {
    private struct State {
        var saved: [Item]
        var failSaves = false
        var saveCount = 0
    }

    private let state: Mutex<State>

    init(_ items: [Item] = []) {
        state = Mutex(State(saved: items))
    }

    /// What was saved last.
    var saved: [Item] { state.withLock { $0.saved } }
    /// How many saves succeeded.
    var saveCount: Int { state.withLock { $0.saveCount } }
    /// Whether saves fail (like a full disk).
    var failSaves: Bool {
        get { state.withLock { $0.failSaves } }
        set { state.withLock { $0.failSaves = newValue } }
    }

    func load() throws(ListrError) -> [Item] { saved }

    func save(_ items: [Item]) throws(ListrError) {
        try state.withLock { state throws(ListrError) in
            if state.failSaves { throw ListrError.saveFailed(path: "memory", reason: "the disk is full") }
            state.saved = items
            state.saveCount += 1
        }
    }
}
