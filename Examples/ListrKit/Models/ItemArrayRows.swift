import Foundation

/// The rows of a list held in memory; an item's key is its 1-based position.
public struct ItemArrayRows: ItemRows {
    /// The items, in order.
    public let items: [Item]

    /// The rows of `items`.
    public init(items: [Item]) {
        self.items = items
    }

    public func forEach(after key: Int64, _ body: (ItemRow) -> Bool) {
        var index = Int(clamping: Swift.max(0, key))
        while index < items.endIndex {
            let item = items[index]
            var title = item.title
            let more = title.withUTF8 { body(ItemRow(key: Int64(index + 1), id: item.id.uuid, title: $0, done: item.done)) }
            guard more else { return }
            index += 1
        }
    }
}
