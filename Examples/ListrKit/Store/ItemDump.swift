/// What a `store dump` reads: the items as they were when it began, and what the store already
/// knows of their property list. Made by ``ItemStore/dump()``.
public struct ItemDump: Sendable {
    /// The items, as the rows of a snapshot.
    public let rows: any ItemRows
    /// How many items there are.
    public let count: Int
    /// The length in bytes of the items' `<dict>`s in the property list (without its head and
    /// tail) when the store knows it; nil when the dump has to measure the rows.
    public let itemsLength: Int?
    /// The store's change count when the rows were taken: a length measured from them is kept
    /// only if nothing changed since (``ItemStore/remember(itemsLength:of:)``).
    public let version: Int
}
