import Foundation
import ToolSupport

/// One JSON object per line, or one text line, on standard output or standard error.
enum Output {
    /// Writes `object` as one line of JSON with sorted keys.
    static func line(_ object: [String: Any], to handle: FileHandle = .standardOutput) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        handle.write(data + Data("\n".utf8))
    }

    /// Writes `text` and a newline, with every control character other than its own line feeds,
    /// bidi override and zero-width character escaped (``TerminalSafe/lines(_:)``); a string a
    /// peer chose is escaped whole with ``safe(_:)`` where it is put into `text`, so that it
    /// cannot forge a line either.
    static func text(_ text: String, to handle: FileHandle = .standardOutput) {
        handle.write(Data((TerminalSafe.lines(text) + "\n").utf8))
    }

    /// A string from elsewhere (a peer's name, an error, a payload) made safe to print on one
    /// line (see ``TerminalSafe/text(_:)``).
    static func safe(_ text: String) -> String {
        TerminalSafe.text(text)
    }

    /// The JSON value of `text` for embedding in a line: the parsed value, or the text itself when
    /// it does not parse (which PeerKit does not let through, but a line is better than nothing).
    static func value(ofJSON text: String) -> Any {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
    }
}
