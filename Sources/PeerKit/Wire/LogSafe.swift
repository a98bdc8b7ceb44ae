/// Makes text that came from the network safe to put in a log line or an error sentence.
///
/// A peer chooses its name, its bye and error reasons, and its message types. Logged as they
/// are, a `\n` in one would start a fake log line and a 4 MiB name would be written with every
/// message. ``text(_:maximumBytes:)`` escapes control characters (`\n` as `\\n`, others as
/// `\u{1B}`) and cuts the text at a character boundary, marking the cut with `…`.
enum LogSafe {
    /// The most bytes of one untrusted string that go into a log line: enough for any name or
    /// reason PeerKit accepts, short enough that no peer can flood the log.
    static let defaultMaximumBytes = 256

    /// `text` with control characters escaped, at most about `maximumBytes` UTF-8 bytes long.
    static func text(_ text: String, maximumBytes: Int = defaultMaximumBytes) -> String {
        // Printable ASCII within the limit comes back as it is, without a look at each scalar's
        // Unicode properties: none of it is escaped or cut. It is the common case (every sentence
        // PeerKit writes, most names and types), and each error's sentence passes here
        // (``PeerKitError``), one for each request a peer sends of a type nothing receives.
        if text.utf8.count <= maximumBytes, text.utf8.allSatisfy({ 0x20 ... 0x7E ~= $0 }) { return text }
        var result = ""
        var bytes = 0
        for scalar in text.unicodeScalars {
            let piece: String
            switch scalar {
            case "\n": piece = "\\n"
            case "\r": piece = "\\r"
            case "\t": piece = "\\t"
            default:
                if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                    || scalar.properties.generalCategory == .lineSeparator || scalar.properties.generalCategory == .paragraphSeparator {
                    piece = "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    piece = String(scalar)
                }
            }
            bytes += piece.utf8.count
            if bytes > maximumBytes {
                result += "…"
                break
            }
            result += piece
        }
        return result
    }
}
