/// Where an ``ItemStore`` keeps its items between runs.
///
/// ``save(_:)`` returns only once the items are durable; the store acknowledges a change only
/// after it returns. ``StoreFile`` is the real one; tests use an in-memory one.
public protocol ItemPersistence: Sendable {
    /// The items saved last, or none when nothing was ever saved.
    func load() throws(ListrError) -> [Item]
    /// Replaces what is saved with `items`, durably, or throws ``ListrError/saveFailed(path:reason:)``
    /// and leaves what was saved before intact.
    func save(_ items: [Item]) throws(ListrError)
}
