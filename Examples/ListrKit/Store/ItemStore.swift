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
    /// The length of every title together, in UTF-8 bytes (at most ``maximumTitleBytes``).
    private var titleBytes: Int
    /// The most bytes of titles the store holds (``ListrLimits/maximumStoreTitleBytes``).
    public nonisolated let maximumTitleBytes: Int
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

    /// How many items one read of a page asks the persistence for: 4,096 (at most 16 MiB of
    /// titles, and few reads for a list of 200,000).
    static let pageBatch = 4096

    /// Opens a store on what `persistence` holds; `onChange` hears of every committed change, in
    /// order, from the store's executor (it must not block). Settings never saved are the
    /// defaults. Adds and replaces that would make the titles take more than `maximumTitleBytes`
    /// are refused (a store already larger, filled by another program, can only shrink).
    public init(
        persistence: any ItemPersistence,
        maximumTitleBytes: Int = ListrLimits.maximumStoreTitleBytes,
        onChange: @escaping @Sendable (ListrChange) -> Void = { _ in }
    ) throws(ListrError) {
        self.persistence = persistence
        self.onChange = onChange
        self.maximumTitleBytes = maximumTitleBytes
        _ = try persistence.changedElsewhere()  // takes note of where the file is now
        self.itemCount = try persistence.count()
        self.titleBytes = try persistence.titleBytes()
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

    /// Up to `limit` items (all when nil) from the 0-based `offset` on, stopping before the item
    /// that would make their sizes (as `measure` gives them) add up to more than `maximumBytes`;
    /// the first item is always included. Reads ``pageBatch`` items at a time.
    public func items(offset: Int, limit: Int?, maximumBytes: Int, measure: @Sendable (Item) -> Int) throws(ListrError) -> [Item] {
        guard offset >= 0 else { throw .invalidPage(reason: "the offset \(offset) is negative") }
        if let limit, limit < 1 { throw .invalidPage(reason: "the limit \(limit) is less than 1") }
        try followChangesElsewhere()
        return try page(from: offset, limit: limit, maximumBytes: maximumBytes, measure: measure)
    }

    private func page(from offset: Int, limit: Int?, maximumBytes: Int, measure: (Item) -> Int) throws(ListrError) -> [Item] {
        var page: [Item] = []
        var bytes = 0
        var next = offset
        while next < itemCount {
            let batch = min(Self.pageBatch, limit.map { $0 - page.count } ?? Self.pageBatch)
            guard batch > 0 else { break }
            let items = try persistence.items(offset: next, limit: batch)
            for item in items {
                let size = measure(item)
                if !page.isEmpty, bytes + size > maximumBytes { return page }
                bytes += size
                page.append(item)
            }
            if items.count < batch { break }
            next += items.count
        }
        return page
    }

    /// Adds an item; returns it with its 1-based position.
    public func add(title: String, by client: String) throws(ListrError) -> (item: Item, position: Int) {
        try ItemList.validate(title: title)
        try followChangesElsewhere()
        guard itemCount < currentSettings.itemLimit else {
            throw .itemLimitReached(limit: currentSettings.itemLimit, wanted: itemCount + 1)
        }
        let bytes = title.utf8.count
        guard titleBytes + bytes <= maximumTitleBytes else {
            throw .storeFull(titleBytes: titleBytes + bytes, limit: maximumTitleBytes)
        }
        let item = Item(title: title)
        try persistence.append(item)
        itemCount += 1
        titleBytes += bytes
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
        titleBytes -= removed.title.utf8.count
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
        let bytes = items.reduce(0) { $0 + $1.title.utf8.count }
        guard bytes <= maximumTitleBytes else {
            throw .storeFull(titleBytes: bytes, limit: maximumTitleBytes)
        }
        try persistence.replaceAll(with: items)
        itemCount = items.count
        titleBytes = bytes
        version += 1
        itemsLength = ItemPropertyListWriter.itemsLength(items)
        onChange(ListrChange(kind: .replaced, client: client, count: items.count))
    }

    /// Runs `register` and returns the items from the first on, as many as fit in `maximumBytes`
    /// (as `measure` gives their sizes; see ``items(offset:limit:maximumBytes:measure:)``), with
    /// no change in between: a watcher registered this way gets exactly the changes made after
    /// the items it is given. When they are not all of them, the rest is read later, page by page.
    public func snapshot(
        maximumBytes: Int, measure: @Sendable (Item) -> Int,
        registering register: () throws(ListrError) -> Void
    ) throws(ListrError) -> [Item] {
        try followChangesElsewhere()
        try register()
        return try page(from: 0, limit: nil, maximumBytes: maximumBytes, measure: measure)
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
        titleBytes = try persistence.titleBytes()
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
