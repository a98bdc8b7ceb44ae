/// Sizes the Listr tools agree on.
public enum ListrLimits {
    /// The largest ordinary message listrd and listrctl accept: 16 MiB, PeerKit's default.
    ///
    /// A store dump or replacement no longer travels as one message: it is a PeerKit resource
    /// (``ListrResources``), sent in chunks, so messages stay small.
    public static let maximumMessageLength = 16 * 1024 * 1024

    /// The largest store a dump or replacement may carry as a resource: 256 MiB. listrd refuses a
    /// larger upload before any byte of it travels (its size is announced), and holds at most
    /// ``maximumPendingUploads`` of them, each at most this large, in memory at once.
    public static let maximumStoreBytes: Int64 = 256 * 1024 * 1024

    /// How many uploaded replacements listrd keeps waiting for their `ReplaceDatabaseCommand`: 2.
    public static let maximumPendingUploads = 2

    /// How many dumps listrd sends at once, to all clients together: 4. Each reads a snapshot of
    /// the database (a connection and a read transaction of its own) until its transfer ends; a
    /// request for another is answered with an error saying so, and nothing else waits.
    public static let maximumConcurrentDumps = 4
}
