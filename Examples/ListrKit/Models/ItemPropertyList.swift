import Foundation

/// The dump format: an XML property list whose root is an array of dicts with the keys `id` (a
/// UUID string), `title` (a string) and `done` (a boolean).
///
/// ```xml
/// <array>
///     <dict>
///         <key>done</key>  <false/>
///         <key>id</key>    <string>6F9619FF-8B86-D011-B42D-00C04FC964FF</string>
///         <key>title</key> <string>Milk</string>
///     </dict>
/// </array>
/// ```
///
/// ``decode(_:)`` checks everything a store relies on before anything is replaced: the
/// structure, the types, that every `id` is a UUID and is unique, and that every title is valid.
public enum ItemPropertyList {
    /// One dict of the root array.
    private struct Entry: Codable {
        var id: String
        var title: String
        var done: Bool
    }

    /// Encodes `items` as an XML property list.
    public static func encode(_ items: [Item]) throws -> Data {
        // Listr's own writer when it can (the same bytes, several times faster); Foundation when not.
        if let data = ItemPropertyListWriter.data(for: items) { return data }
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .xml
        return try encoder.encode(items.map { Entry(id: $0.id.uuidString, title: $0.title, done: $0.done) })
    }

    /// Decodes and validates a property list (XML or binary); throws
    /// ``ListrError/invalidPropertyList(reason:)`` naming the first problem.
    ///
    /// With `checkingRules` false, only the structure, the types and the ids are checked, not
    /// ``ItemList/problem(in:)`` (unique ids, valid titles): for a caller that hands the items to
    /// ``ItemStore/replace(with:by:)``, which checks them itself.
    public static func decode(_ data: Data, checkingRules: Bool = true) throws(ListrError) -> [Item] {
        let entries: [Entry]
        if let scanned = ItemPropertyListScanner.entries(in: data) {
            // The shape Listr writes, read fast; anything else goes through Foundation.
            entries = scanned.map { Entry(id: $0.id, title: $0.title, done: $0.done) }
        } else {
            do {
                entries = try PropertyListDecoder().decode([Entry].self, from: data)
            } catch let error as DecodingError {
                throw .invalidPropertyList(reason: reason(for: error))
            } catch {
                throw .invalidPropertyList(reason: "\(error)")
            }
        }
        var items: [Item] = []
        items.reserveCapacity(entries.count)
        for (offset, entry) in entries.enumerated() {
            guard let id = UUID(uuidString: entry.id) else {
                throw .invalidPropertyList(reason: "the id of item \(offset + 1), \(entry.id.debugDescription), is not a UUID")
            }
            items.append(Item(id: id, title: entry.title, done: entry.done))
        }
        if checkingRules, let problem = ItemList.problem(in: items) {
            throw .invalidPropertyList(reason: problem)
        }
        return items
    }

    /// A clause saying where and what a decoding error is, e.g. `item 2 has no "title"`.
    private static func reason(for error: DecodingError) -> String {
        func place(_ path: [any CodingKey]) -> String {
            guard let item = path.first?.intValue else { return "the root" }
            let position = "item \(item + 1)"
            guard path.count > 1 else { return position }
            return "the \"\(path[1].stringValue)\" of \(position)"
        }
        switch error {
        case let .keyNotFound(key, context):
            return "\(place(context.codingPath)) has no \"\(key.stringValue)\""
        case let .typeMismatch(type, context):
            return "\(place(context.codingPath)) is not \(describe(type))"
        case let .valueNotFound(type, context):
            return "\(place(context.codingPath)) is not \(describe(type))"
        case let .dataCorrupted(context):
            return context.codingPath.isEmpty
                ? "it is not a property list"
                : "\(place(context.codingPath)) is malformed"
        @unknown default:
            return "\(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Bool.Type: return "a boolean"
        case is String.Type: return "a string"
        case is [Entry].Type, is [Any].Type: return "an array"
        case is Entry.Type, is [String: Any].Type: return "a dict"
        default: return "a \(type)"
        }
    }
}
