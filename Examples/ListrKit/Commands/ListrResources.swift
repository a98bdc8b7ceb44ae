/// The names of the PeerKit resources Listr sends.
///
/// - `listr.dump`: listrd sends the store, as the property list `store dump` writes, to a client
///   that asked with ``DumpDatabaseCommand/asResource``.
/// - `listr.replace`: a client uploads a property list; a ``ReplaceDatabaseCommand`` with
///   ``ReplaceDatabaseCommand/upload`` then replaces the list with it.
public enum ListrResources {
    /// The store, sent by listrd.
    public static let dump = "listr.dump"
    /// A replacement list, sent by a client.
    public static let replace = "listr.replace"
}
