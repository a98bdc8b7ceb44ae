import NIOCore

/// The property list of a list of items (what ``ItemPropertyList/encode(_:)`` writes), written
/// piece by piece as it is read: for a `store dump` sent as a resource, so that the dump is
/// written while it travels and never exists whole in memory.
///
/// Each piece holds whole items and at most ``pieceLength`` bytes (more only for an item longer
/// than that). ``size`` is measured first, so the receiver sees the total. Made with
/// ``make(for:pieceLength:)``, which returns nil when an item needs Foundation's writer (the
/// caller then encodes the list whole).
struct ItemPropertyListPieces: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    /// The items, a snapshot taken before writing starts.
    let items: [Item]
    /// Each item's length in the property list (measured once, by ``ItemPropertyListWriter/measure(_:)``).
    let lengths: [Int]
    /// The whole property list's length in bytes.
    let size: Int
    /// The longest piece, in bytes (unless one item is longer).
    let pieceLength: Int

    /// The pieces of `items`' property list, or nil when one of them needs Foundation.
    static func make(for items: [Item], pieceLength: Int = 256 * 1024) -> ItemPropertyListPieces? {
        guard let measured = ItemPropertyListWriter.measure(items) else { return nil }
        return ItemPropertyListPieces(items: items, lengths: measured.lengths, size: measured.size, pieceLength: Swift.max(1, pieceLength))
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(items: items, lengths: lengths, pieceLength: pieceLength)
    }

    /// Writes the next piece when asked for it.
    struct Iterator: AsyncIteratorProtocol {
        let items: [Item]
        let lengths: [Int]
        let pieceLength: Int
        private var next = 0
        private var wroteHead = false
        private var wroteTail = false
        private let allocator = ByteBufferAllocator()

        init(items: [Item], lengths: [Int], pieceLength: Int) {
            self.items = items
            self.lengths = lengths
            self.pieceLength = pieceLength
        }

        mutating func next() async -> ByteBuffer? {
            guard !wroteTail else { return nil }
            let empty = items.isEmpty
            var piece = allocator.buffer(capacity: pieceLength)
            if !wroteHead {
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: ItemPropertyListWriter.headLength(empty: empty)) { raw in
                    raw.baseAddress.map { ItemPropertyListWriter.writeHead(empty: empty, at: $0.assumingMemoryBound(to: UInt8.self)) } ?? 0
                }
                wroteHead = true
            }
            var itemsInPiece = 0
            while next < items.endIndex {
                let item = items[next]
                let length = lengths[next]
                // Whole items only, and no growing the buffer, except for an item longer than a piece.
                guard piece.readableBytes + length <= pieceLength || itemsInPiece == 0 else { break }
                itemsInPiece += 1
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { raw in
                    raw.baseAddress.map { ItemPropertyListWriter.write(item, at: $0.assumingMemoryBound(to: UInt8.self)) } ?? 0
                }
                next += 1
            }
            if next == items.endIndex, piece.readableBytes + ItemPropertyListWriter.tailLength(empty: empty) <= pieceLength || piece.readableBytes == 0 {
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: ItemPropertyListWriter.tailLength(empty: empty)) { raw in
                    raw.baseAddress.map { ItemPropertyListWriter.writeTail(empty: empty, at: $0.assumingMemoryBound(to: UInt8.self)) } ?? 0
                }
                wroteTail = true
            }
            return piece
        }
    }
}
