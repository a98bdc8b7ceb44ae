import ArgumentParser
import Foundation
import ListrKit
import ToolSupport

extension ListrCtl {
    /// `listrctl watch`: prints every change as it happens, until Ctrl-C.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "watch",
            abstract: "Print every change to the list as it happens, until Ctrl-C.",
            discussion: """
            Prints the list, then one line per change (added, done, removed, replaced, settings) naming the client \
            that made it. When listrd stops, says so, waits for it to come back, and prints the list again. \
            With --json, prints one JSON object per line: {"event":"list","items":[…]}, \
            {"event":"added","client":…,"index":…,"item":{…}}, {"event":"disconnected",…}. Ctrl-C exits with status 0.
            """
        )

        @OptionGroup var options: ClientOptions

        func run() async throws {
            let interrupt = Interrupt.exitOnSIGINT()
            defer { withExtendedLifetime(interrupt) {} }
            do throws(ListrCtlError) {
                try await ListrWatchSession(options: options).run(EventPrinter(json: options.json))
            } catch {
                throw options.fail(error)
            }
        }
    }
}

/// `listrctl watch`'s output: the list, then a line per change.
struct EventPrinter: WatchView {
    let json: Bool

    func show(_ items: [ListrKit.Item], from daemon: String, reconnected: Bool, client: ListrClient) async throws(ListrCtlError) {
        if json {
            emit(ListEvent(event: "list", daemon: daemon, reconnected: reconnected, items: ListedItem.numbered(items)))
            return
        }
        let heading = reconnected ? "Reconnected to \(TerminalSafe.quoted(daemon))." : "Watching \(TerminalSafe.quoted(daemon))."
        let list = items.isEmpty ? "The list is empty." : TerminalSafe.rendered(items)
        emit("\(heading) The list has \(items.count) item\(items.count == 1 ? "" : "s"):\n\(list)")
    }

    func apply(_ change: ListrChange, client: ListrClient) async throws(ListrCtlError) {
        if json {
            emit(ChangeEvent(change))
        } else {
            emit(TerminalSafe.sentence(change))
        }
    }

    func lost(_ daemon: String, reason: String?) {
        if json {
            emit(LostEvent(event: "disconnected", daemon: daemon, reason: reason))
        } else {
            emit("Lost the connection to \(TerminalSafe.quoted(daemon))\(reason.map { " (\(TerminalSafe.text($0)))" } ?? ""); reconnecting…")
        }
    }

    private struct ListEvent: Encodable {
        var event: String
        var daemon: String
        var reconnected: Bool
        var items: [ListedItem]
    }

    private struct LostEvent: Encodable {
        var event: String
        var daemon: String
        var reason: String?
    }

    /// A change with its kind as `event`.
    private struct ChangeEvent: Encodable {
        var event: String
        var client: String
        var index: Int?
        var item: ListrKit.Item?
        var count: Int?
        var settings: ListrSettings?

        init(_ change: ListrChange) {
            event = change.kind.rawValue
            client = change.client
            index = change.index
            item = change.item
            count = change.count
            settings = change.settings
        }
    }
}

/// One item with its position, as `item list --json` and `watch --json` print it.
struct ListedItem: Encodable {
    var index: Int
    var id: UUID
    var title: String
    var done: Bool

    /// `items` numbered from `offset + 1`.
    static func numbered(_ items: [ListrKit.Item], from offset: Int = 0) -> [ListedItem] {
        items.enumerated().map { ListedItem(index: offset + $0.offset + 1, id: $0.element.id, title: $0.element.title, done: $0.element.done) }
    }
}

/// Writes one line (a string as is, anything else as compact JSON) to standard output at once.
func emit(_ value: some Encodable) {
    let text: String
    if let string = value as? String {
        text = string
    } else {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, numbers, booleans and UUIDs always encode.
        text = (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
