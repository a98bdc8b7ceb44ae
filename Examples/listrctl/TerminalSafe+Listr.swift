import ListrKit
import ToolSupport

/// What listrctl prints of what listrd and other clients chose (titles, client and daemon names,
/// settings), made safe for a terminal with ``TerminalSafe/text(_:)`` field by field, so that the
/// lines listrctl lays out stay its own. JSON output (`--json`) carries the values as they are.
extension TerminalSafe {
    /// The items' lines, `[ ] title` or `[✓] title`, each title escaped.
    static func rendered(_ items: [ListrKit.Item]) -> String {
        ItemList(items.map { item in
            var item = item
            item.title = text(item.title)
            return item
        }).rendered
    }

    /// The change as a sentence (``ListrChange/sentence``), its client, title and settings escaped.
    static func sentence(_ change: ListrChange) -> String {
        var change = change
        change.client = text(change.client)
        if let title = change.item?.title { change.item?.title = text(title) }
        if let name = change.settings?.name { change.settings?.name = text(name) }
        return change.sentence
    }

    /// A name or a sentence from elsewhere, quoted: `"Listr on vm"`.
    static func quoted(_ name: String) -> String {
        "\"\(text(name))\""
    }
}
