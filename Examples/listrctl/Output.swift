import Foundation
import ListrKit
import ToolSupport

/// Prints answers for a person, or as JSON with `--json`.
struct Output {
    /// Whether to print JSON.
    let json: Bool

    /// Prints a message on standard output; on its own lines, every character a terminal would
    /// act on is escaped (``TerminalSafe/lines(_:)``: the message may quote a title).
    func print(message: String) {
        write(json ? encoded(CLIResponse.message(message)) : TerminalSafe.lines(message), to: .standardOutput)
    }

    /// Prints items with their positions (from `offset + 1`), as `{"items":[…]}`.
    func print(items: [ListrKit.Item], from offset: Int = 0) {
        write(encoded(["items": ListedItem.numbered(items, from: offset)]), to: .standardOutput)
    }

    /// Prints an error on standard error, on one line, escaped (``TerminalSafe/text(_:)``: it may
    /// quote what a daemon or an advertisement chose).
    func report(_ error: ListrCtlError) {
        write(json ? encoded(CLIResponse.error(error.description)) : "listrctl: \(TerminalSafe.text(error.description))", to: .standardError)
    }

    private func encoded(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, numbers, booleans and UUIDs always encode.
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    private func write(_ text: String, to handle: FileHandle) {
        handle.write(Data((text + "\n").utf8))
    }
}
