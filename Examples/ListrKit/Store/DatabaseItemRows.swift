import Foundation
import GRDB
import GRDBSQLite

/// The items of a ``ListrDatabase`` as a GRDB `DatabaseSnapshot` sees them: the database as it
/// was when the snapshot was taken, however long the dump reading it takes.
///
/// Rows are read through SQLite's own column pointers, so a row costs no allocation: its title
/// is handed over as the bytes SQLite holds. The snapshot's connection and read transaction
/// close when the last copy of this value is released.
struct DatabaseItemRows: ItemRows {
    /// The snapshot's connection, in a read transaction of its own.
    let snapshot: DatabaseSnapshot
    /// The database file, for error messages.
    let path: String

    func forEach(after key: Int64, _ body: (ItemRow) -> Bool) throws(ListrError) {
        do {
            try snapshot.read { db in
                let statement = try db.cachedStatement(sql: "SELECT sequence, id, title, done FROM item WHERE sequence > ? ORDER BY sequence")
                let rows = try Row.fetchCursor(statement, arguments: [key])
                let sqlite = statement.sqliteStatement
                while try rows.next() != nil {
                    let sequence = sqlite3_column_int64(sqlite, 0)
                    guard let id = sqlite3_column_blob(sqlite, 1), sqlite3_column_bytes(sqlite, 1) == 16 else {
                        throw ListrError.storeUnreadable(path: path, reason: "the id of the item with sequence \(sequence) is not the 16 bytes of a UUID")
                    }
                    // sqlite3_column_text before sqlite3_column_bytes, as SQLite asks; an empty
                    // title may come as a null pointer.
                    let text = sqlite3_column_text(sqlite, 2)
                    let title = UnsafeBufferPointer(start: text, count: text == nil ? 0 : Int(sqlite3_column_bytes(sqlite, 2)))
                    let row = ItemRow(key: sequence, id: id.loadUnaligned(as: uuid_t.self), title: title, done: sqlite3_column_int(sqlite, 3) != 0)
                    guard body(row) else { return }
                }
            }
        } catch let error as ListrError {
            throw error
        } catch {
            throw .storeUnreadable(path: path, reason: ListrDatabase.reason(error))
        }
    }
}
