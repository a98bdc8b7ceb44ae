/// The daemon's list: applies one change at a time and acknowledges it only once it is saved.
///
/// Every change is made on a copy, saved through the ``ItemPersistence``, and only then becomes
/// the current list; a change that cannot be saved is not made. Being an actor, the store applies
/// changes strictly one after another, whoever sends them. Its methods run on a dedicated
/// executor because saving blocks on `fsync`.
public actor ItemStore {
    private var list: ItemList
    private let persistence: any ItemPersistence
    private let executor = StoreExecutor(label: "listr.store")

    /// Runs the store's methods off the cooperative thread pool (see ``StoreExecutor``).
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    /// Opens a store, loading what `persistence` holds.
    public init(persistence: any ItemPersistence) throws(ListrError) {
        self.persistence = persistence
        self.list = ItemList(try persistence.load())
    }

    /// The items in insertion order.
    public var items: [Item] { list.items }

    /// Adds an item; returns it with its 1-based position.
    public func add(title: String) throws(ListrError) -> (item: Item, position: Int) {
        try change { list throws(ListrError) in try list.add(title: title) }
    }

    /// Marks the item at the 1-based `position` as done; returns it as it was before.
    public func complete(at position: Int) throws(ListrError) -> Item {
        try change { list throws(ListrError) in try list.complete(at: position) }
    }

    /// Removes the item at the 1-based `position`; returns it.
    public func remove(at position: Int) throws(ListrError) -> Item {
        try change { list throws(ListrError) in try list.remove(at: position) }
    }

    /// Replaces every item with `items`.
    public func replace(with items: [Item]) throws(ListrError) {
        try change { list in list = ItemList(items) }
    }

    private func change<Result>(_ body: (inout ItemList) throws(ListrError) -> Result) throws(ListrError) -> Result {
        var next = list
        let result = try body(&next)
        try persistence.save(next.items)
        list = next
        return result
    }
}
