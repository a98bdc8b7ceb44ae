import ListrKit
import Synchronization

/// Persistence in memory, for handler tests without I/O; can be told to fail saves.
final class InMemoryPersistence: ItemPersistence {
    private struct State {
        var saved: [Item]
        var settings: ListrSettings?
        var failSaves = false
        var saveCount = 0
    }

    private let state: Mutex<State>

    init(_ items: [Item] = []) {
        state = Mutex(State(saved: items))
    }

    /// What was saved last.
    var saved: [Item] { state.withLock { $0.saved } }
    /// The settings saved last.
    var savedSettings: ListrSettings? { state.withLock { $0.settings } }
    /// How many saves succeeded.
    var saveCount: Int { state.withLock { $0.saveCount } }
    /// Whether saves fail (like a full disk).
    var failSaves: Bool {
        get { state.withLock { $0.failSaves } }
        set { state.withLock { $0.failSaves = newValue } }
    }

    func count() throws(ListrError) -> Int { saved.count }

    func items(offset: Int, limit: Int?) throws(ListrError) -> [Item] {
        let items = saved.dropFirst(offset)
        return Array(limit.map { items.prefix($0) } ?? items)
    }

    func append(_ item: Item) throws(ListrError) {
        try save { $0.append(item) }
    }

    func complete(at position: Int) throws(ListrError) -> Item {
        try save { items in
            let before = items[position - 1]
            items[position - 1].done = true
            return before
        }
    }

    func remove(at position: Int) throws(ListrError) -> Item {
        try save { $0.remove(at: position - 1) }
    }

    func replaceAll(with items: [Item]) throws(ListrError) {
        try save { $0 = items }
    }

    func loadSettings() throws(ListrError) -> ListrSettings? { savedSettings }

    func saveSettings(_ settings: ListrSettings) throws(ListrError) {
        try state.withLock { state throws(ListrError) in
            if state.failSaves { throw ListrError.saveFailed(path: "memory", reason: "the disk is full") }
            state.settings = settings
        }
    }

    private func save<Result>(_ change: (inout [Item]) -> Result) throws(ListrError) -> Result {
        try state.withLock { state throws(ListrError) -> Result in
            if state.failSaves { throw ListrError.saveFailed(path: "memory", reason: "the disk is full") }
            state.saveCount += 1
            return change(&state.saved)
        }
    }
}
