#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The store at a path: what is there, and opening it as a ``ListrDatabase``.
///
/// ``open()`` accepts exactly three things at the path:
/// - nothing: an empty database is created (built beside it and renamed into place, so it appears
///   complete or not at all). When the path ends in `.sqlite` and a JSON store of an earlier listrd
///   lies beside it (`store.json` for `store.sqlite`), that one is migrated instead;
/// - a Listr database (SQLite, `application_id` ``ListrDatabase/applicationID``, a schema version
///   this listrd reads);
/// - a JSON store of an earlier listrd (`{"format":"listr-store","version":1,"items":[…]}`), which
///   is migrated in place.
///
/// Anything else is refused with ``ListrError/notAStore(path:reason:)`` and never touched, not even
/// opened by SQLite. A store that cannot be written is refused with
/// ``ListrError/storeReadOnly(path:reason:)`` rather than replaced.
///
/// **Migration.** The JSON store is read and checked with the rules every list obeys
/// (``ItemList/problem(in:)``: no two items share an id, every title is one non-blank line); a
/// store that breaks them is refused with ``ListrError/migrationFailed(path:reason:)`` and nothing
/// changes. Otherwise the JSON file is kept beside the store as `<json>.backup` (written and
/// fsynced before anything else moves), the database is built in a temporary file and renamed
/// into place. A crash at any point leaves either the JSON store, migrated again at the next
/// start, or the database.
///
/// **Leftovers.** Temporary files of a start or a save cut short by a crash (`.<name>.…tmp`,
/// `.<name>.new-…`) are removed when the store is opened, under the ``StoreLock``.
public struct StoreFile: Sendable {
    /// The store's path.
    public let path: String

    /// What ``open()`` did besides opening.
    public struct Opened: Sendable {
        /// The open database.
        public var database: ListrDatabase
        /// The JSON store that was migrated, when one was.
        public var migratedFrom: String?
        /// Where the migrated JSON store was kept, when one was.
        public var backup: String?
        /// How many items the migrated JSON store held.
        public var migratedItems: Int
        /// The temporary files of an earlier run that were removed.
        public var removedLeftovers: [String]
        /// Whether a new, empty database was created.
        public var created: Bool
    }

    /// A store kept at `path`. Nothing is touched until ``open()``.
    public init(path: String) {
        self.path = path
    }

    /// The default store path: `$XDG_DATA_HOME/listr/store.sqlite`, else `~/.local/share/listr/store.sqlite`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let dataHome: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            dataHome = xdg
        } else {
            let home = environment["HOME"] ?? NSHomeDirectory()
            dataHome = (home as NSString).appendingPathComponent(".local/share")
        }
        return (dataHome as NSString).appendingPathComponent("listr/store.sqlite")
    }

    /// The folder that holds the store.
    public var directory: String { Self.folder(of: path) }

    /// The JSON store an earlier listrd kept where this one keeps its database: `store.json`
    /// beside `store.sqlite`; nil when the path does not end in `.sqlite`.
    public var siblingJSONPath: String? {
        guard (path as NSString).pathExtension == "sqlite" else { return nil }
        return (path as NSString).deletingPathExtension + ".json"
    }

    /// Creates the folder that holds the store when it is missing.
    public func createDirectory() throws(ListrError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .storeUnreadable(path: path, reason: "its folder \(directory) cannot be created (\(ListrError.reason(forFileError: error)))")
        }
    }

    /// Opens the store (see the type's documentation). Call it while holding the ``StoreLock``.
    public func open() throws(ListrError) -> Opened {
        let removed = removeLeftovers()
        switch try Self.inspect(path) {
        case .listrDatabase:
            try checkWritable(path)
            return Opened(database: try ListrDatabase(openingExisting: path), migratedItems: 0, removedLeftovers: removed, created: false)
        case let .legacyJSON(items, data):
            try checkWritable(path)
            let backup = try migrate(items, data: data, from: path, inPlace: true)
            return Opened(database: try ListrDatabase(openingExisting: path), migratedFrom: path, backup: backup,
                          migratedItems: items.count, removedLeftovers: removed, created: false)
        case .missing:
            try checkFolderWritable()
            if let json = siblingJSONPath, FileManager.default.fileExists(atPath: json) {
                let items: [Item]
                let data: Data
                switch try Self.inspect(json) {
                case let .legacyJSON(legacyItems, legacyData):
                    (items, data) = (legacyItems, legacyData)
                case .missing:
                    return try createEmpty(removed: removed)
                case .listrDatabase:
                    throw .migrationFailed(path: json, reason: "it is a Listr database, not a JSON store; rename it to \((path as NSString).lastPathComponent) or pass it to --store")
                }
                try checkWritable(json)
                let backup = try migrate(items, data: data, from: json, inPlace: false)
                return Opened(database: try ListrDatabase(openingExisting: path), migratedFrom: json, backup: backup,
                              migratedItems: items.count, removedLeftovers: removed, created: false)
            }
            return try createEmpty(removed: removed)
        }
    }

    private func createEmpty(removed: [String]) throws(ListrError) -> Opened {
        try ListrDatabase.create(at: path, items: [], settings: nil)
        return Opened(database: try ListrDatabase(openingExisting: path), migratedItems: 0, removedLeftovers: removed, created: true)
    }

    /// Moves the JSON store at `json` into a new database at ``path``; returns the backup's path.
    private func migrate(_ items: [Item], data: Data, from json: String, inPlace: Bool) throws(ListrError) -> String {
        if let problem = ItemList.problem(in: items) {
            throw .migrationFailed(path: json, reason: problem)
        }
        let backup = json + ".backup"
        do {
            try DurableFile.replace(backup, with: data)
        } catch {
            throw .migrationFailed(path: json, reason: "its backup \(backup) could not be written (\(error))")
        }
        do {
            try ListrDatabase.create(at: path, items: items, settings: nil)
        } catch {
            if !inPlace { unlink(backup) }  // nothing moved: the JSON store is still where it was
            throw .migrationFailed(path: json, reason: "the database could not be written (\(error))")
        }
        if !inPlace {
            // The database is in place: the JSON store now lives on only as the backup.
            unlink(json)
            Self.syncFolder(Self.folder(of: json))
        }
        return backup
    }

    // MARK: What is at a path

    /// What a path holds.
    enum Contents {
        case missing
        case listrDatabase
        case legacyJSON([Item], Data)
    }

    /// The first 16 bytes of every SQLite database.
    private static let sqliteMagic = Array("SQLite format 3\0".utf8)

    /// Looks at `path` without changing it; throws ``ListrError/notAStore(path:reason:)`` for
    /// anything that is neither a Listr database nor a Listr JSON store.
    static func inspect(_ path: String) throws(ListrError) -> Contents {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            let code = errno
            if code == ENOENT { return .missing }
            if code == EACCES { throw .storeReadOnly(path: path, reason: "it cannot even be read (\(String(cString: strerror(code))))") }
            throw .storeUnreadable(path: path, reason: String(cString: strerror(code)).lowercased())
        }
        defer { close(descriptor) }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            throw .notAStore(path: path, reason: "it is a folder")
        }
        var header = [UInt8](repeating: 0, count: 100)
        let count = header.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 100) }
        guard count >= 0 else {
            throw .storeUnreadable(path: path, reason: String(cString: strerror(errno)).lowercased())
        }
        if count == 100, Array(header[0..<16]) == sqliteMagic {
            let applicationID = Int32(bitPattern: bigEndian(header, at: 68))
            let version = Int32(bitPattern: bigEndian(header, at: 60))
            guard applicationID == ListrDatabase.applicationID else {
                throw .notAStore(path: path, reason: "it is an SQLite database of another application (application_id \(applicationID))")
            }
            guard version == ListrDatabase.schemaVersion else {
                throw .notAStore(path: path, reason: "it is a Listr database of schema version \(version) and this listrd reads version \(ListrDatabase.schemaVersion)")
            }
            return .listrDatabase
        }
        if count == 0 { throw .notAStore(path: path, reason: "it is empty") }
        guard header[..<count].first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{") else {
            throw .notAStore(path: path, reason: "it is neither a Listr database nor a JSON store of an earlier listrd")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .storeUnreadable(path: path, reason: ListrError.reason(forFileError: error))
        }
        return .legacyJSON(try decodeLegacy(data, path: path), data)
    }

    private static func bigEndian(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    private struct LegacyDocument: Decodable {
        var format: String
        var version: Int
        var items: [Item]
    }

    /// Decodes a JSON store of an earlier listrd, or throws ``ListrError/notAStore(path:reason:)``.
    static func decodeLegacy(_ data: Data, path: String) throws(ListrError) -> [Item] {
        let document: LegacyDocument
        do {
            document = try JSONDecoder().decode(LegacyDocument.self, from: data)
        } catch {
            throw .notAStore(path: path, reason: "it is not a JSON document with \"format\", \"version\" and \"items\"")
        }
        guard document.format == "listr-store" else {
            throw .notAStore(path: path, reason: "its format is \(document.format.debugDescription), not \"listr-store\"")
        }
        guard document.version == 1 else {
            throw .notAStore(path: path, reason: "it is version \(document.version) and this listrd reads version 1")
        }
        return document.items
    }

    // MARK: Permissions

    private func checkWritable(_ file: String) throws(ListrError) {
        if access(file, R_OK | W_OK) != 0 {
            throw .storeReadOnly(path: file, reason: "this user (uid \(getuid())) may not write it (\(String(cString: strerror(errno)).lowercased()))")
        }
        try checkFolderWritable()
    }

    private func checkFolderWritable() throws(ListrError) {
        if access(directory, W_OK | X_OK) != 0 {
            throw .storeReadOnly(path: path, reason: "this user (uid \(getuid())) may not create files in its folder \(directory) (\(String(cString: strerror(errno)).lowercased())), which SQLite needs for its journal")
        }
    }

    // MARK: Temporary files

    /// `.<name>.`: the start of every temporary file made for the store at `path`.
    static func temporaryPrefix(for path: String) -> String {
        ".\((path as NSString).lastPathComponent)."
    }

    /// Removes what a crash may have left: temporary databases (`.<name>.new-…`, with their
    /// journals) and temporary files of a durable write (`.<name>.….tmp`), for the store, the JSON
    /// store beside it and its backup. Returns the paths removed.
    @discardableResult
    func removeLeftovers() -> [String] {
        var names = [path]
        if let json = siblingJSONPath { names.append(json) }
        names += names.map { $0 + ".backup" }
        let prefixes = names.map(Self.temporaryPrefix(for:))
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var removed: [String] = []
        for entry in entries where prefixes.contains(where: entry.hasPrefix) {
            guard entry.hasSuffix(".tmp") || entry.contains(".new-") else { continue }
            let full = (directory as NSString).appendingPathComponent(entry)
            if unlink(full) == 0 { removed.append(full) }
        }
        if !removed.isEmpty { Self.syncFolder(directory) }
        return removed.sorted()
    }

    /// Removes a database file and the journals SQLite may have left beside it.
    static func removeDatabaseFiles(at path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(path + suffix) }
    }

    static func folder(of path: String) -> String {
        let parent = (path as NSString).deletingLastPathComponent
        return parent.isEmpty ? "." : parent
    }

    /// fsyncs a folder, so that a rename in it is durable; best effort.
    static func syncFolder(_ path: String) {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}
