import Foundation

/// One item as a dump reads it: its title as the UTF-8 bytes it is stored as, so that writing
/// the property list needs no `String` per item.
///
/// The title's bytes are valid only during the call that hands the row over.
public struct ItemRow {
    /// Orders the rows: each is greater than the one before (the database's `sequence`).
    public var key: Int64
    /// The item's id, as the 16 bytes of a UUID.
    public var id: uuid_t
    /// The title's bytes, as stored; ``ItemPropertyListWriter`` checks that they are UTF-8.
    public var title: UnsafeBufferPointer<UInt8>
    /// Whether the item is done.
    public var done: Bool

    /// A row of the given fields.
    public init(key: Int64, id: uuid_t, title: UnsafeBufferPointer<UInt8>, done: Bool) {
        self.key = key
        self.id = id
        self.title = title
        self.done = done
    }
}
