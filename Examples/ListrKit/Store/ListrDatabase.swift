import Foundation
import GRDB
import Synchronization

/// The store as an SQLite database, through GRDB: one transaction per change, committed before
/// the change is acknowledged.
///
/// **Schema** (version 1, in `PRAGMA user_version`; `PRAGMA application_id` is
/// ``applicationID``, so that any other SQLite file is recognised and refused):
///
/// ```sql
/// CREATE TABLE item (sequence INTEGER PRIMARY KEY,                    -- insertion order (the rowid)
///                    id BLOB NOT NULL CHECK (length(id) = 16),        -- a UUID's 16 bytes
///                    title TEXT NOT NULL,
///                    done INTEGER NOT NULL CHECK (done IN (0, 1)));
/// CREATE UNIQUE INDEX item_id ON item (id);                            -- two items never share an id
/// CREATE TABLE settings (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL);  -- ListrSettings
/// ```
///
/// **Journal and sync.** The database is in WAL mode with `synchronous = FULL`: each commit
/// appends to the write-ahead log and fsyncs it, and nothing else. WAL makes a commit one
/// sequential append whatever the size of the list (a rollback journal would also rewrite the
/// pages). `FULL` rather than `NORMAL` because listrd acknowledges a change only after its
/// commit, and promises that an acknowledged change survives a power loss, not only a crash of
/// listrd: with `NORMAL` the WAL is fsynced only at checkpoints, so the last commits could
/// vanish with the power (SIGKILL alone loses nothing either way, the log being in the kernel's
/// cache). The price is one fsync per change, the same on a list of 200,000 items as on an
/// empty one.
///
/// **Cache.** The writer's page cache is ``cacheSize`` (64 MiB) rather than SQLite's 2 MiB, so
/// that a replace of 200,000 items (about 30 MB of pages) does not spill and re-read pages
/// mid-transaction. Readers keep SQLite's default cache and map the file instead (``mapSize``).
///
/// **Connections.** A store file is opened as a GRDB `DatabasePool`: one writer, and readers
/// that see the last commit. A `store dump` reads from a snapshot of its own
/// (``dumpRows()``), a read transaction held while the dump travels, so that changes made
/// meanwhile neither wait for it nor show up in it. An in-memory database (for tests) is one
/// connection, and its dumps read the items into memory.
///
/// **Other programs.** listrd owns the file while it serves it (``StoreLock`` keeps a second
/// listrd away), but nothing stops the `sqlite3` shell or a restore tool from committing to it.
/// ``changedElsewhere()`` notices such a commit through `PRAGMA data_version`, so that the store
/// reads its count and settings again rather than trusting what it kept. While such a program
/// holds the write lock, a change waits for it up to ``busyTimeout``, then fails with
/// ``ListrError/storeBusy(path:)``.
public final class ListrDatabase: ItemPersistence {
    /// `PRAGMA application_id` of a Listr database: `0x4C535452`, "LSTR".
    public static let applicationID: Int32 = 0x4C53_5452
    /// The schema version this listrd reads and writes.
    public static let schemaVersion: Int32 = 1

    /// How long a change waits for another program's write transaction to end before it fails
    /// with ``ListrError/storeBusy(path:)``: 2 seconds (SQLite's busy timeout).
    public static let busyTimeout: Duration = .seconds(2)

    /// The most memory SQLite's page cache may take: 64 MiB.
    public static let cacheSize = 64 * 1024 * 1024

    /// How much of the database file a reader (a dump's snapshot, above all) maps into memory,
    /// so that it reads pages in place rather than through a `pread` each: 1 GiB of address
    /// space, of which only what is read takes memory.
    public static let mapSize = 1 << 30

    /// The database file's path (`:memory:` for an in-memory one).
    public let path: String
    private let writer: any DatabaseWriter
    /// `PRAGMA data_version` of the writer connection when ``changedElsewhere()`` last read it.
    private let seenDataVersion = Mutex<Int64?>(nil)

    /// Opens the Listr database at `path`, which ``StoreFile`` has inspected; WAL mode,
    /// `synchronous = FULL`. Throws ``ListrError/storeReadOnly(path:reason:)`` when it cannot be
    /// written.
    init(openingExisting path: String) throws(ListrError) {
        var configuration = Self.configuration()
        configuration.journalMode = .wal
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            writer = pool
            // A write at once: a store that cannot be written is refused now, not at the first change.
            try pool.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE; COMMIT") }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_READONLY || error.resultCode == .SQLITE_CANTOPEN {
            throw .storeReadOnly(path: path, reason: Self.reason(error))
        } catch {
            throw .storeUnreadable(path: path, reason: Self.reason(error))
        }
        self.path = path
    }

    /// An empty database in memory, with the real schema: for tests.
    public static func inMemory() throws -> ListrDatabase {
        try ListrDatabase(memory: ())
    }

    private init(memory: Void) throws {
        let queue = try DatabaseQueue(configuration: Self.configuration())
        try queue.write { db in try Self.createSchema(db) }
        writer = queue
        path = ":memory:"
    }

    private static func configuration() -> Configuration {
        var configuration = Configuration()
        configuration.label = "listr"
        configuration.busyMode = .timeout(TimeInterval(busyTimeout.components.seconds))
        configuration.prepareDatabase { db in
            // Readers (and snapshots) keep SQLite's small default cache: each would otherwise
            // hold up to 64 MiB after one dump.
            if db.configuration.readonly {
                try db.execute(sql: "PRAGMA mmap_size = \(mapSize)")
            } else {
                try db.execute(sql: "PRAGMA synchronous = FULL; PRAGMA cache_size = -\(cacheSize / 1024)")
            }
        }
        return configuration
    }

    /// Creates a Listr database at `path` holding `items` (and `settings`, when given), so that it
    /// appears complete or not at all: it is built in a temporary file beside `path`, committed,
    /// closed, renamed to `path`, and the folder is fsynced. A failure leaves no file behind.
    static func create(at path: String, items: [Item], settings: ListrSettings?) throws(ListrError) {
        let folder = StoreFile.folder(of: path)
        let temporary = (folder as NSString).appendingPathComponent(StoreFile.temporaryPrefix(for: path) + "new-\(UUID().uuidString)")
        var renamed = false
        defer {
            if !renamed { StoreFile.removeDatabaseFiles(at: temporary) }
        }
        do {
            let queue = try DatabaseQueue(path: temporary, configuration: configuration())
            try queue.write { db in
                try createSchema(db)
                try insert(items, into: db)
                if let settings { try save(settings, in: db) }
            }
            try queue.close()
        } catch {
            throw .saveFailed(path: path, reason: reason(error))
        }
        guard rename(temporary, path) == 0 else {
            throw .saveFailed(path: path, reason: "renaming \(temporary) to it failed (\(String(cString: strerror(errno))))")
        }
        renamed = true
        StoreFile.syncFolder(folder)
    }

    private static func createSchema(_ db: Database) throws {
        try db.execute(sql: """
            PRAGMA application_id = \(applicationID);
            PRAGMA user_version = \(schemaVersion);
            CREATE TABLE item (
                sequence INTEGER PRIMARY KEY,
                id BLOB NOT NULL CHECK (length(id) = 16),
                title TEXT NOT NULL,
                done INTEGER NOT NULL CHECK (done IN (0, 1))
            );
            CREATE UNIQUE INDEX item_id ON item (id);
            CREATE TABLE settings (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL);
            """)
    }

    private static func insert(_ items: [Item], into db: Database, from sequence: Int = 1) throws {
        let statement = try db.makeStatement(sql: "INSERT INTO item (id, sequence, title, done) VALUES (?, ?, ?, ?)")
        for (offset, item) in items.enumerated() {
            try statement.execute(arguments: [blob(item.id), sequence + offset, item.title, item.done])
        }
    }

    private static func save(_ settings: ListrSettings, in db: Database) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(settings), as: UTF8.self)
        try db.execute(sql: "INSERT OR REPLACE INTO settings (id, json) VALUES (1, ?)", arguments: [json])
    }

    // MARK: ItemPersistence

    /// How many items there are (`SELECT COUNT(*)`).
    public func count() throws(ListrError) -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? 0 }
    }

    /// The length of every title together, in UTF-8 bytes (`SUM(length(CAST(title AS BLOB)))`,
    /// one pass over the rows, made at start-up and after another program's commit).
    public func titleBytes() throws(ListrError) -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(length(CAST(title AS BLOB))), 0) FROM item") ?? 0 }
    }

    /// A page of items in insertion order, through the `sequence` index.
    public func items(offset: Int, limit: Int?) throws(ListrError) -> [Item] {
        try read { db in
            let rows = try Row.fetchCursor(
                db, sql: "SELECT id, title, done FROM item ORDER BY sequence LIMIT ? OFFSET ?",
                arguments: [limit ?? -1, offset]
            )
            var items: [Item] = []
            if let limit { items.reserveCapacity(limit) }
            var position = offset
            while let row = try rows.next() {
                position += 1
                items.append(try Self.item(row, position: position))
            }
            return items
        }
    }

    /// Every item as it is now, read from a snapshot of the database file (a read transaction on
    /// a connection of its own, closed when the rows are released); in memory for an in-memory
    /// database.
    public func dumpRows() throws(ListrError) -> any ItemRows {
        guard let pool = writer as? DatabasePool else {
            return ItemArrayRows(items: try items(offset: 0, limit: nil))
        }
        do {
            return DatabaseItemRows(snapshot: try pool.makeSnapshot(), path: path)
        } catch {
            throw .storeUnreadable(path: path, reason: Self.reason(error))
        }
    }

    /// Whether another connection to the file (another program) committed since the last call,
    /// from `PRAGMA data_version` on the writer connection: SQLite moves it with every commit made
    /// through any other connection, and never with the writer's own. The first call takes note.
    public func changedElsewhere() throws(ListrError) -> Bool {
        let version: Int64
        do {
            // The writer, not a reader: the pragma compares with the connection's own last look.
            version = try writer.writeWithoutTransaction { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
        } catch {
            throw .storeUnreadable(path: path, reason: Self.reason(error))
        }
        return seenDataVersion.withLock { seen in
            defer { seen = version }
            return seen.map { $0 != version } ?? false
        }
    }

    /// Adds `item` after the last one, in one transaction.
    public func append(_ item: Item) throws(ListrError) {
        try write { db in
            try db.execute(
                sql: "INSERT INTO item (id, sequence, title, done) VALUES (?, (SELECT COALESCE(MAX(sequence), 0) + 1 FROM item), ?, ?)",
                arguments: [Self.blob(item.id), item.title, item.done]
            )
        }
    }

    /// Marks the item at the 1-based `position` as done, in one transaction; returns it as it was.
    public func complete(at position: Int) throws(ListrError) -> Item {
        try write { db in
            let (sequence, item) = try Self.row(at: position, in: db)
            if !item.done {
                try db.execute(sql: "UPDATE item SET done = 1 WHERE sequence = ?", arguments: [sequence])
            }
            return item
        }
    }

    /// Removes the item at the 1-based `position`, in one transaction; returns it.
    public func remove(at position: Int) throws(ListrError) -> Item {
        try write { db in
            let (sequence, item) = try Self.row(at: position, in: db)
            try db.execute(sql: "DELETE FROM item WHERE sequence = ?", arguments: [sequence])
            return item
        }
    }

    /// Replaces every item, in one transaction: all of them or none.
    public func replaceAll(with items: [Item]) throws(ListrError) {
        try write { db in
            // The unique index is built once after the inserts, which is faster than keeping it up
            // to date through 200,000 random inserts; it is part of the transaction, so duplicate
            // ids make the CREATE fail and the whole replace roll back.
            try db.execute(sql: "DROP INDEX item_id; DELETE FROM item")
            try Self.insert(items, into: db)
            try db.execute(sql: "CREATE UNIQUE INDEX item_id ON item (id)")
        }
    }

    /// The settings saved last, or nil.
    public func loadSettings() throws(ListrError) -> ListrSettings? {
        let json = try read { db in try String.fetchOne(db, sql: "SELECT json FROM settings WHERE id = 1") }
        guard let json else { return nil }
        do {
            return try JSONDecoder().decode(ListrSettings.self, from: Data(json.utf8))
        } catch {
            throw .storeUnreadable(path: path, reason: "its settings are not valid (\(error))")
        }
    }

    /// Saves the settings, in one transaction.
    public func saveSettings(_ settings: ListrSettings) throws(ListrError) {
        try write { db in try Self.save(settings, in: db) }
    }

    // MARK: Helpers

    private static func row(at position: Int, in db: Database) throws -> (sequence: Int64, item: Item) {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT sequence, id, title, done FROM item ORDER BY sequence LIMIT 1 OFFSET ?",
            arguments: [position - 1]
        ) else {
            throw ListrError.noSuchItem(position: position, count: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? 0)
        }
        return (try row.decode(Int64.self, atIndex: 0), try item(row, from: 1, position: position))
    }

    /// The item in the columns `id, title, done` of `row`, starting at index `column` (read by
    /// index, and the id without copying it: a dump reads every row).
    private static func item(_ row: Row, from column: Int = 0, position: Int) throws -> Item {
        let uuid = try row.withUnsafeData(atIndex: column) { bytes throws -> uuid_t in
            guard let bytes, bytes.count == 16 else {
                throw ListrError.storeUnreadable(path: "the database", reason: "the id of item \(position) is \(bytes?.count ?? 0) bytes long, not the 16 of a UUID")
            }
            // One 16-byte load (Data's generic copyBytes cost more than the rest of the row).
            return bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
        }
        return Item(id: UUID(uuid: uuid), title: try row.decode(String.self, atIndex: column + 1), done: try row.decode(Bool.self, atIndex: column + 2))
    }

    /// A UUID as its 16 bytes.
    private static func blob(_ id: UUID) -> Data {
        withUnsafeBytes(of: id.uuid) { Data($0) }
    }

    private func read<T>(_ body: (Database) throws -> T) throws(ListrError) -> T {
        do {
            return try writer.read(body)
        } catch let error as ListrError {
            throw error
        } catch {
            throw .storeUnreadable(path: path, reason: Self.reason(error))
        }
    }

    private func write<T>(_ body: (Database) throws -> T) throws(ListrError) -> T {
        do {
            return try writer.write(body)
        } catch let error as ListrError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
            throw .storeBusy(path: path)
        } catch {
            throw .saveFailed(path: path, reason: Self.reason(error))
        }
    }

    /// An SQLite error as a clause: its message, e.g. "attempt to write a readonly database".
    static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return error.message ?? "SQLite error \(error.resultCode.rawValue)"
        }
        return "\(error)"
    }
}
