/// Sizes the Listr tools agree on.
public enum ListrLimits {
    /// The largest ordinary message listrd and listrctl accept: 16 MiB, PeerKit's default.
    ///
    /// A store dump or replacement no longer travels as one message: it is a PeerKit resource
    /// (``ListrResources``), sent in chunks, so messages stay small.
    public static let maximumMessageLength = 16 * 1024 * 1024

    /// The largest store a dump or replacement may carry as a resource: 256 MiB. listrd refuses a
    /// larger upload before any byte of it travels (its size is announced), and holds at most
    /// ``maximumPendingUploads`` of them, each at most this large, in memory at once.
    public static let maximumStoreBytes: Int64 = 256 * 1024 * 1024

    /// How many uploaded replacements listrd holds at once, being received or waiting for their
    /// `ReplaceDatabaseCommand`: 2. An upload takes its slot when it starts, so a third one is
    /// refused at once, however many start together.
    public static let maximumPendingUploads = 2

    /// How many dumps listrd sends at once, to all clients together: 4. Each reads a snapshot of
    /// the database (a connection and a read transaction of its own) until its transfer ends; a
    /// request for another is answered with an error saying so, and nothing else waits.
    public static let maximumConcurrentDumps = 4

    /// How many of those may go to one address (an IPv4 address, or an IPv6 /64) at once: one
    /// fewer than all, so that one host, whatever peer IDs it claims, never holds every slot.
    public static let maximumConcurrentDumpsPerAddress = maximumConcurrentDumps - 1
}

extension ListrLimits {
    /// The longest title an item may have: 4 KiB (4,096 bytes of UTF-8).
    ///
    /// A to-do item is a line of text; 4 KiB is a long paragraph. Without a limit one client
    /// could add titles of up to a whole message (16 MiB), and two of them would make every
    /// `item list` and `watch` answer larger than a message can be. A longer title is refused with
    /// ``ListrError/titleTooLong(bytes:limit:)``, in an add, a replace and a JSON migration alike.
    public static let maximumTitleBytes = 4 * 1024

    /// The most bytes of titles (UTF-8) the store holds, all items together: 64 MiB.
    ///
    /// The item limit (a setting, up to 10,000,000) counts items, not bytes: at 4 KiB a title,
    /// a million items would be 4 GiB of disk, and a dump of that could not travel (dumps are at
    /// most ``maximumStoreBytes``, 256 MiB). 64 MiB of titles is 16,000 titles of the longest
    /// kind, or 1.6 million of 40 bytes, several times any real to-do list; with the property
    /// list's 140 bytes or so around each item, a store at the default item limit (1,000,000)
    /// and at this size dumps within ``maximumStoreBytes`` unless its titles are mostly `&`, `<`
    /// or `>` (written as `&amp;`…). An add or a replace that would go over it is refused with
    /// ``ListrError/storeFull(titleBytes:limit:)``; removing items makes room again.
    public static let maximumStoreTitleBytes = 64 * 1024 * 1024

    /// The most bytes of items listrd puts in one answer (an `item list` page, the list a `watch`
    /// starts from), measured as their property list: 8 MiB.
    ///
    /// An answer travels as one PeerKit message, in base64 inside JSON (4/3 of the size), and a
    /// message is at most ``maximumMessageLength`` (16 MiB): 8 MiB of property list is 10.7 MiB on
    /// the wire, well within it. listrd stops a page at this size (it always answers at least one
    /// item), and listrctl asks for the next page from where the last one ended until it has
    /// every item it wants, so that no list is too long to list.
    public static let maximumAnswerBytes = 8 * 1024 * 1024

    /// The most bytes of changes queued for one watcher (measured as their JSON, about): 256 KiB.
    ///
    /// Changes reach a watcher through PeerKit's outbox, which holds 1 MiB before `send` waits;
    /// this queue sits above it while it waits. 256 KiB is about 2,000 ordinary changes, or 60
    /// with the longest titles: a watcher further behind than that is not keeping up, and is
    /// dropped with ``ListrError/watcherFellBehind(queuedBytes:limit:)`` (logged, and told with a
    /// ``WatchEndedEvent`` when it can still be reached); what was queued for it is freed at once.
    /// With at most ``ListrWatchers/maximumWatchers`` watchers, the queues hold at most 16 MiB.
    public static let maximumQueuedChangeBytesPerWatcher = 256 * 1024
}
