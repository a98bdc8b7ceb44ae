import Foundation

extension ItemList {
    /// The rules every list obeys, wherever it comes from (a replace, a JSON store being
    /// migrated): every title is valid and no two items share an id. Returns the first problem
    /// as a clause (`items 1 and 2 have the same id …`), or nil when there is none.
    public static func problem(in items: [Item]) -> String? {
        var positions: [UUID: Int] = [:]
        positions.reserveCapacity(items.count)
        for (offset, item) in items.enumerated() {
            let position = offset + 1
            if let first = positions.updateValue(position, forKey: item.id) {
                return "items \(first) and \(position) have the same id \(item.id.uuidString)"
            }
            do {
                try validate(title: item.title)
            } catch {
                return "item \(position) has an unusable title: \(error)"
            }
        }
        return nil
    }
}
