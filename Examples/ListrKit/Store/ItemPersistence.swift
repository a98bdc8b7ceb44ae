/// Where an ``ItemStore`` keeps its items and settings.
///
/// Each method that changes something is one transaction: it returns only once the change is
/// durable, or throws ``ListrError/saveFailed(path:reason:)`` and leaves everything as it was.
/// The store acknowledges a change only after it returns. Positions are 1-based, in insertion
/// order, and the store checks them before it calls a method. ``ListrDatabase`` (SQLite) is the
/// real one; tests also use an in-memory one.
public protocol ItemPersistence: Sendable {
    /// How many items there are.
    func count() throws(ListrError) -> Int
    /// The length of all titles together, in UTF-8 bytes (what ``ListrLimits/maximumStoreTitleBytes``
    /// bounds); the default reads every item with ``items(offset:limit:)``.
    func titleBytes() throws(ListrError) -> Int
    /// Up to `limit` items (all, when nil) from the 0-based `offset` on, in insertion order.
    func items(offset: Int, limit: Int?) throws(ListrError) -> [Item]
    /// Adds `item` after the last one.
    func append(_ item: Item) throws(ListrError)
    /// Marks the item at the 1-based `position` as done; returns it as it was before.
    func complete(at position: Int) throws(ListrError) -> Item
    /// Removes the item at the 1-based `position`; returns it.
    func remove(at position: Int) throws(ListrError) -> Item
    /// Replaces every item with `items` (already checked with ``ItemList/problem(in:)``).
    func replaceAll(with items: [Item]) throws(ListrError)
    /// The settings saved last, or nil when none were ever saved.
    func loadSettings() throws(ListrError) -> ListrSettings?
    /// Saves `settings`.
    func saveSettings(_ settings: ListrSettings) throws(ListrError)
    /// Every item as it is now, for a dump that reads them while later changes go on; the
    /// default reads them into memory with ``items(offset:limit:)``.
    func dumpRows() throws(ListrError) -> any ItemRows
    /// Whether another program committed a change since the last call; the first call only
    /// takes note. The default, for a persistence nothing else can reach, is always false.
    func changedElsewhere() throws(ListrError) -> Bool
}

extension ItemPersistence {
    public func titleBytes() throws(ListrError) -> Int {
        try items(offset: 0, limit: nil).reduce(0) { $0 + $1.title.utf8.count }
    }

    public func changedElsewhere() throws(ListrError) -> Bool { false }

    public func dumpRows() throws(ListrError) -> any ItemRows {
        ItemArrayRows(items: try items(offset: 0, limit: nil))
    }
}
