import Foundation

/// One JSON object per line, or one text line, on standard output or standard error.
enum Output {
    /// Writes `object` as one line of JSON with sorted keys.
    static func line(_ object: [String: Any], to handle: FileHandle = .standardOutput) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        handle.write(data + Data("\n".utf8))
    }

    /// Writes `text` and a newline.
    static func text(_ text: String, to handle: FileHandle = .standardOutput) {
        handle.write(Data((text + "\n").utf8))
    }

    /// The JSON value of `text` for embedding in a line: the parsed value, or the text itself when
    /// it does not parse (which PeerKit does not let through, but a line is better than nothing).
    static func value(ofJSON text: String) -> Any {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
    }
}
