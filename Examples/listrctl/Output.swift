import Foundation
import ListrKit

/// Prints answers for a person, or as JSON with `--json`.
struct Output {
    /// Whether to print JSON.
    let json: Bool

    /// One entry of `item list --json`.
    private struct ListedItem: Encodable {
        var index: Int
        var id: UUID
        var title: String
        var done: Bool
    }

    /// Prints a message on standard output.
    func print(message: String) {
        write(json ? encoded(CLIResponse.message(message)) : message, to: .standardOutput)
    }

    /// Prints items with their positions, as `{"items":[…]}`.
    func print(items: [ListrKit.Item]) {
        let listed = items.enumerated().map { ListedItem(index: $0.offset + 1, id: $0.element.id, title: $0.element.title, done: $0.element.done) }
        write(encoded(["items": listed]), to: .standardOutput)
    }

    /// Prints an error on standard error.
    func report(_ error: ListrCtlError) {
        write(json ? encoded(CLIResponse.error(error.description)) : "listrctl: \(error.description)", to: .standardError)
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
