/// The coding path of a container, as a linked list: extending it costs one node, not a copy of
/// the whole path (which would make decoding deep documents cost their size times their depth).
/// The `[CodingKey]` array is only built when someone asks for it (errors, `codingPath`).
final class JSONCodingPath {
    let parent: JSONCodingPath?
    let key: any CodingKey

    init(parent: JSONCodingPath?, key: any CodingKey) {
        self.parent = parent
        self.key = key
    }

    /// The keys from the top level down to `key`, then `last` when given.
    static func keys(_ path: JSONCodingPath?, then last: (any CodingKey)?) -> [any CodingKey] {
        var keys: [any CodingKey] = []
        if let last { keys.append(last) }
        var node = path
        while let current = node {
            keys.append(current.key)
            node = current.parent
        }
        keys.reverse()
        return keys
    }
}
