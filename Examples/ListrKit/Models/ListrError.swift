/// Everything that can go wrong in the Listr store, as sentences for the person at the keyboard.
///
/// Errors about a command (``noSuchItem(position:count:)``, ``invalidTitle(_:reason:)``,
/// ``invalidPropertyList(reason:)``, ``saveFailed(path:reason:)``) travel back to `listrctl` as
/// ``CLIResponse/error(_:)``; errors about the store file stop `listrd` at start-up.
public enum ListrError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A title is empty or is not a single line.
    case invalidTitle(String, reason: String)
    /// A 1-based position names no item.
    case noSuchItem(position: Int, count: Int)
    /// Data given to replace the store is not a valid Listr property list.
    case invalidPropertyList(reason: String)
    /// The store file exists but cannot be read.
    case storeUnreadable(path: String, reason: String)
    /// The store file exists but does not hold a Listr store. It is left untouched.
    case notAStore(path: String, reason: String)
    /// Another process holds the store.
    case storeInUse(path: String)
    /// A change could not be written to disk, so it was not made.
    case saveFailed(path: String, reason: String)
    /// Another program held the database's write lock for longer than listrd waits
    /// (``ListrDatabase/busyTimeout``), so the change was not made.
    case storeBusy(path: String)
    /// The store (or its folder) cannot be written, so listrd refuses it rather than fail every change.
    case storeReadOnly(path: String, reason: String)
    /// A JSON store of an earlier listrd could not be moved into the database; nothing was changed.
    case migrationFailed(path: String, reason: String)
    /// An add or a replace would make the list longer than the `item-limit` setting allows.
    case itemLimitReached(limit: Int, wanted: Int)
    /// `config set` named no setting.
    case unknownSetting(String)
    /// `config set` gave a value a setting cannot take.
    case invalidSetting(key: String, value: String, reason: String)
    /// `item list --limit/--offset` asked for an impossible page.
    case invalidPage(reason: String)
    /// The daemon already serves as many watchers as it allows.
    case tooManyWatchers(limit: Int)
    /// A title is longer than ``ListrLimits/maximumTitleBytes`` (in UTF-8 bytes).
    case titleTooLong(bytes: Int, limit: Int)
    /// An add or a replace would make the titles take more than ``ListrLimits/maximumStoreTitleBytes``.
    case storeFull(titleBytes: Int, limit: Int)
    /// A watcher fell further behind than ``ListrLimits/maximumQueuedChangeBytesPerWatcher`` and was dropped.
    case watcherFellBehind(queuedBytes: Int, limit: Int)
    /// The whole list was asked for in one answer, and it is larger than one answer may be.
    case answerTooLarge(items: Int, limit: Int)
    /// listrd already holds or receives ``ListrLimits/maximumPendingUploads`` uploaded lists.
    case tooManyUploads(limit: Int)

    /// The error as a sentence that says what happened and what to do.
    public var description: String {
        switch self {
        case let .invalidTitle(title, reason):
            return "The title \(title.debugDescription) cannot be used: \(reason). Give a single line of text."
        case let .noSuchItem(position, count):
            let items = count == 0 ? "the list is empty" : "the list has \(count) item\(count == 1 ? "" : "s"), numbered from 1"
            return "There is no item \(position): \(items). Run \"listrctl item list\" to see the items."
        case let .invalidPropertyList(reason):
            return "The data is not a Listr property list: \(reason). Nothing was changed; use a file written by \"listrctl store dump\"."
        case let .storeUnreadable(path, reason):
            return "The store file \(path) cannot be read: \(reason). Check its permissions, or pass another --store."
        case let .notAStore(path, reason):
            return "The file \(path) is not a Listr store (\(reason)). listrd leaves it untouched: move it away, or pass another --store."
        case let .storeInUse(path):
            return "The store file \(path) is in use by another listrd. Stop that one, or pass another --store."
        case let .saveFailed(path, reason):
            return "The change was not made because it could not be saved to \(path): \(reason). Check the disk and the folder's permissions."
        case let .storeBusy(path):
            return "The change was not made because another program has been writing to \(path) for over \(ListrDatabase.busyTimeout.components.seconds) seconds (SQLite: database is locked). Try again once it has committed or quit, e.g. an open transaction in the sqlite3 shell."
        case let .storeReadOnly(path, reason):
            return "The store \(path) cannot be written: \(reason). listrd refuses a store it cannot change; fix the permissions, or pass another --store."
        case let .migrationFailed(path, reason):
            return "The JSON store \(path) could not be moved into the database: \(reason). Nothing was changed; fix or move the file, or pass another --store."
        case let .itemLimitReached(limit, wanted):
            return "The list would have \(wanted) items and the item limit is \(limit). Nothing was changed; remove items, or raise the limit with \"listrctl config set item-limit N\"."
        case let .unknownSetting(key):
            return "There is no setting \(key.debugDescription); the settings are \(ListrSettings.Key.allCases.map(\.rawValue).joined(separator: ", ")). Nothing was changed."
        case let .invalidSetting(key, value, reason):
            return "The setting \(key) cannot be \(value.debugDescription): \(reason). Nothing was changed."
        case let .invalidPage(reason):
            return "That page of the list cannot be shown: \(reason). Give --limit 1 or more and --offset 0 or more."
        case let .tooManyWatchers(limit):
            return "listrd already serves \(limit) watchers, its limit. Stop a \"listrctl watch\" and try again."
        case let .titleTooLong(bytes, limit):
            return "The title is \(bytes) bytes long, and a title may have at most \(limit) bytes (UTF-8). Nothing was changed; give a shorter title."
        case let .storeFull(titleBytes, limit):
            return "The titles would take \(titleBytes) bytes, and the store holds at most \(limit) bytes of titles. Nothing was changed; remove items to make room."
        case let .watcherFellBehind(queuedBytes, limit):
            return "listrd stopped sending changes to this watcher because it fell behind: \(queuedBytes) bytes of changes were waiting for it, more than the \(limit) bytes listrd keeps for one watcher. Watch again to start from the current list."
        case let .answerTooLarge(items, limit):
            return "The list (\(items) items) is larger than one answer may be (\(limit) bytes), so it was not sent. Use \"listrctl store dump\", which receives it as a resource in chunks."
        case let .tooManyUploads(limit):
            return "listrd already holds or receives \(limit) uploaded lists waiting for their command, its limit (ListrLimits.maximumPendingUploads), so this upload was refused and nothing was changed. Try again once one of those replaces has been done."
        }
    }
}
