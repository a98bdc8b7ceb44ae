#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A store kept in one JSON file, replaced atomically and durably on every change.
///
/// The file is a versioned document, so that anything else is recognised and refused:
///
/// ```json
/// {"format": "listr-store", "version": 1, "items": [{"id": "…", "title": "Milk", "done": false}]}
/// ```
///
/// A save writes a temporary file next to the store, fsyncs it, renames it over the store and
/// fsyncs the folder, so after a crash the file holds either the old or the new list, and a
/// save that returned survives power loss.
public struct StoreFile: ItemPersistence {
    /// The path of the store file.
    public let path: String

    private static let format = "listr-store"
    private static let version = 1

    private struct Document: Codable {
        var format: String
        var version: Int
        var items: [Item]
    }

    /// A store kept at `path`. Nothing is touched until ``load()`` or ``save(_:)``.
    public init(path: String) {
        self.path = path
    }

    /// The default store path: `$XDG_DATA_HOME/listr/store.json`, else `~/.local/share/listr/store.json`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let dataHome: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            dataHome = xdg
        } else {
            let home = environment["HOME"] ?? NSHomeDirectory()
            dataHome = (home as NSString).appendingPathComponent(".local/share")
        }
        return (dataHome as NSString).appendingPathComponent("listr/store.json")
    }

    /// The folder that holds the store file.
    public var directory: String {
        let parent = (path as NSString).deletingLastPathComponent
        return parent.isEmpty ? "." : parent
    }

    /// Creates the folder that holds the store when it is missing.
    public func createDirectory() throws(ListrError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .storeUnreadable(path: path, reason: "its folder \(directory) cannot be created (\(ListrError.reason(forFileError: error)))")
        }
    }

    /// The saved items; none when the file does not exist. Throws ``ListrError/notAStore(path:reason:)``
    /// for a file that is not a store (and leaves it untouched).
    public func load() throws(ListrError) -> [Item] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch CocoaError.fileReadNoSuchFile {
            return []
        } catch {
            throw .storeUnreadable(path: path, reason: ListrError.reason(forFileError: error))
        }
        return try Self.decode(data, path: path)
    }

    /// Replaces the file with `items`, durably (see the type's documentation).
    public func save(_ items: [Item]) throws(ListrError) {
        let data: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            data = try encoder.encode(Document(format: Self.format, version: Self.version, items: items))
        } catch {
            throw .saveFailed(path: path, reason: "the items could not be encoded (\(error))")
        }
        do {
            try DurableFile.replace(path, with: data)
        } catch {
            throw .saveFailed(path: path, reason: error.description)
        }
    }

    /// Decodes a store document, or throws ``ListrError/notAStore(path:reason:)``.
    static func decode(_ data: Data, path: String) throws(ListrError) -> [Item] {
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch {
            let reason = data.isEmpty ? "it is empty" : "it is not a JSON document with \"format\", \"version\" and \"items\""
            throw .notAStore(path: path, reason: reason)
        }
        guard document.format == format else {
            throw .notAStore(path: path, reason: "its format is \(document.format.debugDescription), not \"\(format)\"")
        }
        guard document.version == version else {
            throw .notAStore(path: path, reason: "it is version \(document.version) and this listrd reads version \(version)")
        }
        return document.items
    }
}
