import Foundation
import ListrKit
import PeerKit
import ToolSupport

/// `listrctl item list --watch`: the list (or the page `--limit`/`--offset` select) drawn again
/// after every change; on a terminal, in place (the screen is cleared and redrawn), otherwise
/// printed again, followed by an empty line.
struct ListWatchView: WatchView {
    let limit: Int?
    let offset: Int?
    let json: Bool
    /// Whether standard output is a terminal.
    let inPlace = isatty(STDOUT_FILENO) == 1

    func show(_ items: [ListrKit.Item], from daemon: String, reconnected: Bool, client: ListrClient) async throws(ListrCtlError) {
        try await redraw(client: client, status: reconnected ? "reconnected" : nil)
    }

    func apply(_ change: ListrChange, client: ListrClient) async throws(ListrCtlError) {
        try await redraw(client: client, status: TerminalSafe.sentence(change))
    }

    func lost(_ daemon: String, reason: String?) {
        let line = "Lost the connection to \(TerminalSafe.quoted(daemon))\(reason.map { " (\(TerminalSafe.text($0)))" } ?? ""); reconnecting…"
        if json {
            var event = ["event": "disconnected", "daemon": daemon]
            if let reason { event["reason"] = reason }
            emit(event)
        } else {
            emit(line)
        }
    }

    private func redraw(client: ListrClient, status: String?) async throws(ListrCtlError) {
        if json {
            let page = try await client.items(limit: limit, offset: offset)
            emit(["items": ListedItem.numbered(page, from: offset ?? 0)])
            return
        }
        let text = try await client.renderedItems(limit: limit, offset: offset)
        if inPlace {
            let heading = "\(TerminalSafe.quoted(client.daemon.name)), watching (Ctrl-C to stop)\(status.map { ": \($0)" } ?? "")"
            FileHandle.standardOutput.write(Data(("\u{1B}[H\u{1B}[2J" + heading + "\n\n" + text + "\n").utf8))
        } else {
            emit(text + "\n")
        }
    }
}
