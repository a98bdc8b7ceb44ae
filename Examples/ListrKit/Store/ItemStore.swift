/// The daemon's list and settings: applies one change at a time, acknowledges it only once it is
/// committed, and then reports it to `onChange` (which pushes it to watchers).
///
/// The items live in the ``ItemPersistence`` (the SQLite database), not in memory; the store
/// keeps only their count, so a change costs the same on a list of 200,000 items as on an empty
/// one. Once a dump or a replace has measured it, it also keeps the length of their property
/// list up to date with every change, so that a dump reads the list once, not twice. Being an
/// actor, the store applies changes strictly one after another, whoever sends them, and reports
/// them in that order. Its methods run on a dedicated executor because a commit blocks on `fsync`.
///
/// Before each method it asks the persistence whether another program committed a change (see
/// ``ItemPersistence/changedElsewhere()``); if one did, it reads the count and the settings
/// again, forgets the length, and reports a replace by ``elsewhere`` (and a settings change,
/// when the settings differ), so that watchers know to read the list again.
public actor ItemStore {
    private let persistence: any ItemPersistence
    private let onChange: @Sendable (ListrChange) -> Void
    private let executor = StoreExecutor(label: "listr.store")
    private var itemCount: Int
    /// The length of the items' `<dict>`s in a dump's property list, once measured; nil before,
    /// and while an item has a title only Foundation can write.
    private var itemsLength: Int?
    /// Counts the changes to the items.
    private var version = 0
    /// The settings in effect (see ``settings``).
    private var currentSettings: ListrSettings

    /// The client name of changes another program committed to the persistence: "another program".
    public static let elsewhere = "another program"

    /// Runs the store's methods off the cooperative thread pool (see ``StoreExecutor``).
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    /// Opens a store on what `persistence` holds; `onChange` hears of every committed change, in
    /// order, from the store's executor (it must not block). Settings never saved are the
    /// defaults.
    public init(persistence: any ItemPersistence, onChange: @escaping @Sendable (ListrChange) -> Void = { _ in }) throws(ListrError) {
        self.persistence = persistence
        self.onChange = onChange
        _ = try persistence.changedElsewhere()  // takes note of where the file is now
        self.itemCount = try persistence.count()
        self.currentSettings = try persistence.loadSettings() ?? .defaults
    }

    /// How many items there are.
    public var count: Int {
        get throws(ListrError) {
            try followChangesElsewhere()
            return itemCount
        }
    }

    /// The settings in effect.
    public var settings: ListrSettings {
        get throws(ListrError) {
            try followChangesElsewhere()
            return currentSettings
        }
    }

    /// Every item, in insertion order.
    public var items: [Item] {
        get throws(ListrError) { try persistence.items(offset: 0, limit: nil) }
    }

    /// Every item as it is now, for a `store dump`: changes made while the dump reads them
    /// neither wait for it nor show up in it (see ``ItemPersistence/dumpRows()``).
    public func dump() throws(ListrError) -> ItemDump {
        try followChangesElsewhere()
        return ItemDump(rows: try persistence.dumpRows(), count: itemCount, itemsLength: itemsLength, version: version)
    }

    /// Keeps the length a dump measured, unless the items changed since `dump` was taken.
    public func remember(itemsLength: Int, of dump: ItemDump) {
        if dump.version == version { self.itemsLength = itemsLength }
    }

    /// Up to `limit` items (all when nil) from the 0-based `offset` on.
    public func items(offset: Int, limit: Int?) throws(ListrError) -> [Item] {
        guard offset >= 0 else { throw .invalidPage(reason: "the offset \(offset) is negative") }
        if let limit, limit < 1 { throw .invalidPage(reason: "the limit \(limit) is less than 1") }
        try followChangesElsewhere()
        if offset >= itemCount { return [] }
        return try persistence.items(offset: offset, limit: limit)
    }

    /// Adds an item; returns it with its 1-based position.
    public func add(title: String, by client: String) throws(ListrError) -> (item: Item, position: Int) {
        try ItemList.validate(title: title)
        try followChangesElsewhere()
        guard itemCount < currentSettings.itemLimit else {
            throw .itemLimitReached(limit: currentSettings.itemLimit, wanted: itemCount + 1)
        }
        let item = Item(title: title)
        try persistence.append(item)
        itemCount += 1
        changed(removing: nil, adding: item)
        onChange(ListrChange(kind: .added, client: client, index: itemCount, item: item))
        return (item, itemCount)
    }

    /// Marks the item at the 1-based `position` as done; returns it as it was before.
    public func complete(at position: Int, by client: String) throws(ListrError) -> Item {
        try check(position)
        let before = try persistence.complete(at: position)
        if !before.done {
            var after = before
            after.done = true
            changed(removing: before, adding: after)
            onChange(ListrChange(kind: .done, client: client, index: position, item: after))
        }
        return before
    }

    /// Removes the item at the 1-based `position`; returns it.
    public func remove(at position: Int, by client: String) throws(ListrError) -> Item {
        try check(position)
        let removed = try persistence.remove(at: position)
        itemCount -= 1
        changed(removing: removed, adding: nil)
        onChange(ListrChange(kind: .removed, client: client, index: position, item: removed))
        return removed
    }

    /// Replaces every item with `items`, after checking them with ``ItemList/problem(in:)``.
    public func replace(with items: [Item], by client: String) throws(ListrError) {
        if let problem = ItemList.problem(in: items) { throw .invalidPropertyList(reason: problem) }
        try followChangesElsewhere()
        guard items.count <= currentSettings.itemLimit else {
            throw .itemLimitReached(limit: currentSettings.itemLimit, wanted: items.count)
        }
        try persistence.replaceAll(with: items)
        itemCount = items.count
        version += 1
        itemsLength = ItemPropertyListWriter.itemsLength(items)
        onChange(ListrChange(kind: .replaced, client: client, count: items.count))
    }

    /// Runs `register` and returns every item, with no change in between: a watcher registered
    /// this way gets exactly the changes made after the list it is given.
    public func snapshot(registering register: () throws(ListrError) -> Void) throws(ListrError) -> [Item] {
        try followChangesElsewhere()
        try register()
        return try persistence.items(offset: 0, limit: nil)
    }

    /// Changes the settings with `change`; saves them and reports them, or throws and changes
    /// nothing. An item limit below the current number of items is refused.
    @discardableResult
    public func updateSettings(by client: String, _ change: (inout ListrSettings) throws(ListrError) -> Void) throws(ListrError) -> ListrSettings {
        try followChangesElsewhere()
        var next = currentSettings
        try change(&next)
        if next.itemLimit < itemCount {
            throw .invalidSetting(
                key: ListrSettings.Key.itemLimit.rawValue, value: String(next.itemLimit),
                reason: "the list holds \(itemCount) items already; remove some first"
            )
        }
        guard next != currentSettings else { return next }
        try persistence.saveSettings(next)
        currentSettings = next
        onChange(ListrChange(kind: .settings, client: client, settings: next))
        return next
    }

    /// Follows a committed change of one item in ``itemsLength``.
    private func changed(removing old: Item?, adding new: Item?) {
        version += 1
        guard var length = itemsLength else { return }
        if let old {
            guard let oldLength = ItemPropertyListWriter.length(of: old) else {
                itemsLength = nil
                return
            }
            length -= oldLength
        }
        if let new {
            guard let newLength = ItemPropertyListWriter.length(of: new) else {
                itemsLength = nil
                return
            }
            length += newLength
        }
        itemsLength = length
    }

    /// Takes in what another program committed to the persistence since the last look, if
    /// anything (see the type's documentation). Every method does this first; listrd also calls
    /// it every second while anyone watches, so that watchers hear of such a commit without
    /// waiting for a request.
    public func followChangesElsewhere() throws(ListrError) {
        guard try persistence.changedElsewhere() else { return }
        itemCount = try persistence.count()
        itemsLength = nil
        version += 1
        onChange(ListrChange(kind: .replaced, client: Self.elsewhere, count: itemCount))
        let saved = try persistence.loadSettings() ?? .defaults
        if saved != currentSettings {
            currentSettings = saved
            onChange(ListrChange(kind: .settings, client: Self.elsewhere, settings: saved))
        }
    }

    private func check(_ position: Int) throws(ListrError) {
        try followChangesElsewhere()
        guard position >= 1, position <= itemCount else {
            throw .noSuchItem(position: position, count: itemCount)
        }
    }
}
