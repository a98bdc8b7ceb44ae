/// The to-do list as a plain value: the rules of every change, with no I/O.
///
/// Positions are 1-based, in insertion order, as ``rendered`` lists them.
public struct ItemList: Hashable, Sendable {
    /// The items in insertion order.
    public private(set) var items: [Item]

    /// Creates a list holding `items`.
    public init(_ items: [Item] = []) {
        self.items = items
    }

    /// Appends a new item; returns it with its 1-based position.
    public mutating func add(title: String) throws(ListrError) -> (item: Item, position: Int) {
        try Self.validate(title: title)
        let item = Item(title: title)
        items.append(item)
        return (item, items.count)
    }

    /// Marks the item at the 1-based `position` as done; returns it as it was before.
    public mutating func complete(at position: Int) throws(ListrError) -> Item {
        let index = try self.index(of: position)
        let before = items[index]
        items[index].done = true
        return before
    }

    /// Removes the item at the 1-based `position`; returns it.
    public mutating func remove(at position: Int) throws(ListrError) -> Item {
        items.remove(at: try index(of: position))
    }

    /// One line per item, `[ ] title` or `[✓] title`; an empty string for an empty list.
    public var rendered: String {
        items.map { "[\($0.done ? "✓" : " ")] \($0.title)" }.joined(separator: "\n")
    }

    /// Throws ``ListrError/titleTooLong(bytes:limit:)`` for a title longer than
    /// ``ListrLimits/maximumTitleBytes``, and ``ListrError/invalidTitle(_:reason:)`` unless `title`
    /// is one non-blank line.
    public static func validate(title: String) throws(ListrError) {
        let bytes = title.utf8.count
        if bytes > ListrLimits.maximumTitleBytes {
            throw .titleTooLong(bytes: bytes, limit: ListrLimits.maximumTitleBytes)
        }
        // Fast path for the common case, plain ASCII: a title of printable characters and spaces
        // is valid unless it is all spaces. (Checking every scalar's general category costs about
        // a second on a replace of 200,000 items.)
        var visible = false
        var plain = true
        for byte in title.utf8 {
            if byte > 0x20, byte < 0x7F {
                visible = true
            } else if byte != 0x20 {
                plain = false
                break
            }
        }
        if plain {
            if visible { return }
            throw .invalidTitle(title, reason: "it is blank")
        }
        if title.allSatisfy(\.isWhitespace) {
            throw .invalidTitle(title, reason: "it is blank")
        }
        if title.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw .invalidTitle(title, reason: "it contains a line break or another control character")
        }
    }

    private func index(of position: Int) throws(ListrError) -> Int {
        guard position >= 1, position <= items.count else {
            throw .noSuchItem(position: position, count: items.count)
        }
        return position - 1
    }
}
