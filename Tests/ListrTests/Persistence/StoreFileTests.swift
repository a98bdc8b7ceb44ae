import Foundation
import ListrKit
import Testing

@Suite("StoreFile on disk")
struct StoreFileTests {
    let folder: String

    init() throws {
        folder = NSTemporaryDirectory() + "listr-storefile-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    private func remove() { try? FileManager.default.removeItem(atPath: folder) }

    @Test("a missing store file loads as an empty list")
    func missingIsEmpty() throws {
        defer { remove() }
        #expect(try StoreFile(path: folder + "/none.json").load() == [])
    }

    @Test("saved items load back, and no temporary file is left behind")
    func saveLoad() throws {
        defer { remove() }
        let store = StoreFile(path: folder + "/store.json")
        let items = [Item(title: "Milk"), Item(title: "Bread", done: true)]
        try store.save(items)
        #expect(try store.load() == items)
        let more = items + [Item(title: "Eggs")]
        try store.save(more)
        #expect(try store.load() == more)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["store.json"])
    }

    @Test("a file that is not a store is refused, named, and left untouched", arguments: [
        "", "hello", #"{"items":[]}"#, #"{"format":"other","version":1,"items":[]}"#,
        #"{"format":"listr-store","version":2,"items":[]}"#, "[1,2,3]",
    ])
    func refusesForeignFiles(_ contents: String) throws {
        defer { remove() }
        let path = folder + "/store.json"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        #expect {
            try StoreFile(path: path).load()
        } throws: { error in
            guard case let ListrError.notAStore(named, _) = error else { return false }
            return named == path && "\(error)".contains(path)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contents.utf8))
    }

    @Test("creating the folder makes nested folders; a second lock on one store is refused")
    func folderAndLock() throws {
        defer { remove() }
        let store = StoreFile(path: folder + "/a/b/store.json")
        try store.createDirectory()
        try store.save([Item(title: "x")])
        do {
            let lock = try StoreLock(storePath: store.path)
            #expect(throws: ListrError.storeInUse(path: store.path)) { try StoreLock(storePath: store.path) }
            withExtendedLifetime(lock) {}
        }
        #expect(throws: Never.self) { try StoreLock(storePath: store.path) }
    }

    @Test("the default path follows XDG_DATA_HOME, else HOME")
    func defaultPath() {
        #expect(StoreFile.defaultPath(environment: ["XDG_DATA_HOME": "/x/data", "HOME": "/home/a"]) == "/x/data/listr/store.json")
        #expect(StoreFile.defaultPath(environment: ["HOME": "/home/a"]) == "/home/a/.local/share/listr/store.json")
        #expect(StoreFile.defaultPath(environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/a"]) == "/home/a/.local/share/listr/store.json")
    }

    @Test("file errors read as short clauses")
    func fileErrorReasons() throws {
        defer { remove() }
        #expect(throws: (any Error).self) { try Data(contentsOf: URL(fileURLWithPath: folder + "/none")) }
        do {
            _ = try Data(contentsOf: URL(fileURLWithPath: folder + "/none"))
        } catch {
            #expect(ListrError.reason(forFileError: error) == "no such file")
        }
        do {
            _ = try Data(contentsOf: URL(fileURLWithPath: folder))
        } catch {
            #expect(ListrError.reason(forFileError: error) == "it is a folder")
        }
    }
}
