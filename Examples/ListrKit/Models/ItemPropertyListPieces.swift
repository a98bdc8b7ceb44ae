import NIOCore

/// The property list of a list of items (what ``ItemPropertyList/encode(_:)`` writes), written
/// piece by piece from the list's ``ItemRows`` as it is sent: for a `store dump` sent as a
/// resource, so that the dump exists neither whole nor as items in memory.
///
/// Each piece holds whole items and at most ``pieceLength`` bytes (more only for an item longer
/// than that). ``size`` is known first, so the receiver sees the total: the ``ItemStore`` keeps
/// it, or ``make(rows:count:itemsLength:pieceLength:)`` measures it in a pass over the rows that
/// builds nothing, and returns nil when an item needs Foundation's writer (the caller then
/// encodes the list whole).
struct ItemPropertyListPieces: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    /// The rows, an unchanging view of the list taken before writing starts.
    let rows: any ItemRows
    /// The length of the items' `<dict>`s, without the property list's head and tail.
    let itemsLength: Int
    /// Whether the list has no items (its property list is then `<array/>`).
    let isEmpty: Bool
    /// The longest piece, in bytes (unless one item is longer).
    let pieceLength: Int

    /// The whole property list's length in bytes.
    var size: Int {
        ItemPropertyListWriter.headLength(empty: isEmpty) + itemsLength + ItemPropertyListWriter.tailLength(empty: isEmpty)
    }

    /// The pieces of the property list of `rows`, or nil when one of them needs Foundation.
    /// `count` and `itemsLength`, when the caller knows them (all or nothing), spare the pass
    /// that measures the rows.
    static func make(rows: any ItemRows, count: Int? = nil, itemsLength: Int? = nil, pieceLength: Int = 256 * 1024) throws(ListrError) -> ItemPropertyListPieces? {
        let pieceLength = Swift.max(1, pieceLength)
        if let count, let itemsLength {
            return ItemPropertyListPieces(rows: rows, itemsLength: itemsLength, isEmpty: count == 0, pieceLength: pieceLength)
        }
        var itemsLength = 0
        var count = 0
        var writable = true
        try rows.forEach(after: 0) { row in
            guard let length = ItemPropertyListWriter.length(of: row) else {
                writable = false
                return false
            }
            itemsLength += length
            count += 1
            return true
        }
        guard writable else { return nil }
        return ItemPropertyListPieces(rows: rows, itemsLength: itemsLength, isEmpty: count == 0, pieceLength: pieceLength)
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(rows: rows, isEmpty: isEmpty, pieceLength: pieceLength)
    }

    /// Reads and writes the next piece when asked for it.
    struct Iterator: AsyncIteratorProtocol {
        let rows: any ItemRows
        let isEmpty: Bool
        let pieceLength: Int
        /// The key of the last row written.
        private var lastKey: Int64 = 0
        private var wroteHead = false
        private var wroteRows = false
        private var wroteTail = false
        private let allocator = ByteBufferAllocator()

        init(rows: any ItemRows, isEmpty: Bool, pieceLength: Int) {
            self.rows = rows
            self.isEmpty = isEmpty
            self.pieceLength = pieceLength
        }

        mutating func next() async throws -> ByteBuffer? {
            guard !wroteTail else { return nil }
            var piece = allocator.buffer(capacity: pieceLength)
            if !wroteHead {
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: ItemPropertyListWriter.headLength(empty: isEmpty)) { raw in
                    raw.baseAddress.map { ItemPropertyListWriter.writeHead(empty: isEmpty, at: $0.assumingMemoryBound(to: UInt8.self)) } ?? 0
                }
                wroteHead = true
            }
            if !wroteRows {
                try writeRows(into: &piece)
            }
            let tailLength = ItemPropertyListWriter.tailLength(empty: isEmpty)
            if wroteRows, piece.readableBytes + tailLength <= pieceLength || piece.readableBytes == 0 {
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: tailLength) { raw in
                    raw.baseAddress.map { ItemPropertyListWriter.writeTail(empty: isEmpty, at: $0.assumingMemoryBound(to: UInt8.self)) } ?? 0
                }
                wroteTail = true
            }
            return piece
        }

        /// Appends the rows after ``lastKey`` that fit in the piece (at least one, however long).
        /// The rows were measured, and so checked, by the store or by
        /// ``make(rows:count:itemsLength:pieceLength:)``; a row is given room for its longest
        /// escaping, so a piece may end a little short.
        private mutating func writeRows(into piece: inout ByteBuffer) throws(ListrError) {
            let pieceLength = pieceLength
            var lastKey = lastKey
            var itemsInPiece = 0
            var full = false
            try rows.forEach(after: lastKey) { row in
                let room = ItemPropertyListWriter.maximumLength(of: row)
                // Whole items only, and no growing the buffer, except for an item longer than a piece.
                guard piece.readableBytes + room <= pieceLength || itemsInPiece == 0 else {
                    full = true
                    return false
                }
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { raw in
                    raw.baseAddress.map { ItemPropertyListWriter.write(row, at: $0.assumingMemoryBound(to: UInt8.self)) } ?? 0
                }
                itemsInPiece += 1
                lastKey = row.key
                return true
            }
            self.lastKey = lastKey
            wroteRows = !full
        }
    }
}
