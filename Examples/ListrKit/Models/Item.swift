import Foundation

/// One entry of the to-do list.
///
/// Items are kept in insertion order; users address them by their 1-based position in that
/// order (as `listrctl item list` shows them), while `id` identifies an item across dumps.
public struct Item: Codable, Hashable, Identifiable, Sendable {
    /// A stable identity, kept by dump and replace.
    public var id: UUID
    /// What is to be done.
    public var title: String
    /// Whether it has been done.
    public var done: Bool

    /// Creates an item; a new one gets a fresh ID and is not done.
    public init(id: UUID = UUID(), title: String, done: Bool = false) {
        self.id = id
        self.title = title
        self.done = done
    }
}
