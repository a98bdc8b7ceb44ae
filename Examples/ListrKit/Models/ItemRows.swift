/// The items of a `store dump`, as they were when the dump began, read row by row as often as
/// needed: to measure the property list when the store does not know its length, and while it
/// is written and sent.
///
/// ``ListrDatabase`` answers with a snapshot of the database (a read transaction of its own), so
/// changes made while a dump travels neither wait for it nor show up in it; ``ItemArrayRows`` is
/// a list already in memory.
public protocol ItemRows: Sendable {
    /// Calls `body` with each row whose key is greater than `key`, in order, until `body` returns
    /// false (the row it was given then counts as not read) or the rows run out.
    func forEach(after key: Int64, _ body: (ItemRow) -> Bool) throws(ListrError)
}
