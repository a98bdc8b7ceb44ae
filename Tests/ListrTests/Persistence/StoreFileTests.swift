import Foundation
import ListrKit
import Testing

@Suite("StoreFile: what is at the store's path, and migration")
struct StoreFileTests {
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "listr-storefile-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    private func remove() { try? FileManager.default.removeItem(atPath: folder) }
    private func names() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: folder).sorted() }

    private func legacy(_ items: [Item]) throws -> Data {
        struct Document: Encodable { var format = "listr-store"; var version = 1; var items: [Item] }
        return try JSONEncoder().encode(Document(items: items))
    }

    @Test("a missing store is created as an empty Listr database, and nothing else is left")
    func createsEmpty() throws {
        defer { remove() }
        let opened = try StoreFile(path: folder + "/store.sqlite").open()
        #expect(opened.created)
        #expect(try opened.database.count() == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/store.sqlite")).prefix(16) == Data("SQLite format 3\0".utf8))
        let present = try names()
        #expect(present.allSatisfy { $0.hasPrefix("store.sqlite") }, "\(present)")
    }

    @Test("items and settings saved in the database are there when it is opened again")
    func reopens() throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        do {
            let database = try StoreFile(path: path).open().database
            try database.append(Item(title: "Milk"))
            try database.append(Item(title: "Bread"))
            _ = try database.complete(at: 2)
            try database.saveSettings(ListrSettings(logLevel: .debug, name: "Shed", itemLimit: 9))
        }
        let opened = try StoreFile(path: path).open()
        #expect(!opened.created)
        #expect(try opened.database.items(offset: 0, limit: nil).map(\.title) == ["Milk", "Bread"])
        #expect(try opened.database.items(offset: 0, limit: nil).map(\.done) == [false, true])
        #expect(try opened.database.loadSettings() == ListrSettings(logLevel: .debug, name: "Shed", itemLimit: 9))
    }

    @Test("a JSON store at the path is migrated in place, with the JSON kept as a backup")
    func migratesInPlace() throws {
        defer { remove() }
        let items = [Item(title: "Milk"), Item(title: "Bread", done: true)]
        let json = try legacy(items)
        let path = folder + "/store.json"
        try json.write(to: URL(fileURLWithPath: path))
        let opened = try StoreFile(path: path).open()
        #expect(opened.migratedFrom == path)
        #expect(opened.backup == path + ".backup")
        #expect(opened.migratedItems == 2)
        #expect(try opened.database.items(offset: 0, limit: nil) == items)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path + ".backup")) == json)
        let present = try names()
        #expect(present.allSatisfy { !$0.hasPrefix(".") }, "\(present)")
    }

    @Test("store.json beside a missing store.sqlite is migrated into it and kept only as a backup")
    func migratesSibling() throws {
        defer { remove() }
        let items = [Item(title: "Milk")]
        try legacy(items).write(to: URL(fileURLWithPath: folder + "/store.json"))
        let opened = try StoreFile(path: folder + "/store.sqlite").open()
        #expect(opened.migratedFrom == folder + "/store.json")
        #expect(try opened.database.items(offset: 0, limit: nil) == items)
        #expect(!FileManager.default.fileExists(atPath: folder + "/store.json"))
        #expect(FileManager.default.fileExists(atPath: folder + "/store.json.backup"))
    }

    @Test("a JSON store that breaks the list's rules is refused at migration and nothing changes", arguments: [
        ("duplicate ids", "have the same id"),
        ("a blank title", "has an unusable title"),
    ])
    func refusesInvalidJSON(_ problem: String, _ reason: String) throws {
        defer { remove() }
        let milk = Item(title: "Milk")
        let items = problem == "duplicate ids" ? [milk, milk] : [Item(title: " ")]
        let json = try legacy(items)
        let path = folder + "/store.json"
        try json.write(to: URL(fileURLWithPath: path))
        #expect {
            try StoreFile(path: path).open()
        } throws: { error in
            guard case let ListrError.migrationFailed(named, actual) = error else { return false }
            return named == path && actual.contains(reason)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == json)
        #expect(try names() == ["store.json"])
    }

    @Test("a file that is not a store is refused, named, and left untouched", arguments: [
        "", "hello", #"{"items":[]}"#, #"{"format":"other","version":1,"items":[]}"#,
        #"{"format":"listr-store","version":2,"items":[]}"#, "[1,2,3]",
        "SQLite format 3\0" + String(repeating: "\0", count: 200),
    ])
    func refusesForeignFiles(_ contents: String) throws {
        defer { remove() }
        let path = folder + "/store.sqlite"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        #expect {
            try StoreFile(path: path).open()
        } throws: { error in
            guard case let ListrError.notAStore(named, _) = error else { return false }
            return named == path && "\(error)".contains(path)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contents.utf8))
        #expect(try names() == ["store.sqlite"])
    }

    @Test("temporary files of a run cut short are removed, and only those")
    func removesLeftovers() throws {
        defer { remove() }
        let leftovers = [".store.sqlite.new-1234", ".store.sqlite.new-1234-journal", ".store.json.ABCD.tmp", ".store.json.backup.EF01.tmp"]
        for name in leftovers + [".store.sqlite.mine", "other.tmp"] {
            try Data("x".utf8).write(to: URL(fileURLWithPath: folder + "/" + name))
        }
        let opened = try StoreFile(path: folder + "/store.sqlite").open()
        #expect(opened.removedLeftovers == leftovers.map { folder + "/" + $0 }.sorted())
        #expect(try names().filter { !$0.hasPrefix("store.sqlite") } == [".store.sqlite.mine", "other.tmp"])
    }

    @Test("creating the folder makes nested folders; a second lock on one store is refused")
    func folderAndLock() throws {
        defer { remove() }
        let store = StoreFile(path: folder + "/a/b/store.sqlite")
        try store.createDirectory()
        _ = try store.open()
        do {
            let lock = try StoreLock(storePath: store.path)
            #expect(throws: ListrError.storeInUse(path: store.path)) { try StoreLock(storePath: store.path) }
            withExtendedLifetime(lock) {}
        }
        #expect(throws: Never.self) { try StoreLock(storePath: store.path) }
    }

    @Test("the default path follows XDG_DATA_HOME, else HOME")
    func defaultPath() {
        #expect(StoreFile.defaultPath(environment: ["XDG_DATA_HOME": "/x/data", "HOME": "/home/a"]) == "/x/data/listr/store.sqlite")
        #expect(StoreFile.defaultPath(environment: ["HOME": "/home/a"]) == "/home/a/.local/share/listr/store.sqlite")
        #expect(StoreFile.defaultPath(environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/a"]) == "/home/a/.local/share/listr/store.sqlite")
    }

    @Test("file errors read as short clauses")
    func fileErrorReasons() throws {
        defer { remove() }
        do {
            _ = try Data(contentsOf: URL(fileURLWithPath: folder + "/none"))
            Issue.record("reading a missing file succeeded")
        } catch {
            #expect(ListrError.reason(forFileError: error) == "no such file")
        }
        do {
            _ = try Data(contentsOf: URL(fileURLWithPath: folder))
            Issue.record("reading a folder succeeded")
        } catch {
            #expect(ListrError.reason(forFileError: error) == "it is a folder")
        }
    }
}
