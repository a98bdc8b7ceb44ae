/// Makes text that came from somewhere else (a peer's name, an advertised instance name, an item's
/// title, an error a peer sent) safe to print on a terminal.
///
/// A terminal obeys what it is sent: `ESC]0;…BEL` sets the window title, `ESC[2J` clears the
/// screen, a carriage return or a line feed lets text forge a line that seems to come from the
/// tool, U+202E turns the rest of a line around, and zero-width characters hide text. The tools
/// print no untrusted string without passing it through ``text(_:)``, which writes every such
/// character visibly, the way PeerKit's log does (`LogSafe`): `\n`, `\r`, `\t`, and `\u{1B}`
/// (the code point in hexadecimal) for the others.
///
/// Escaped: the C0 controls (U+0000–U+001F), DEL (U+007F) and the C1 controls (U+0080–U+009F)
/// (general category Cc); the format characters (Cf), which include the bidi embeddings,
/// overrides and isolates (U+202A–U+202E, U+2066–U+2069), the zero-width characters
/// (U+200B–U+200F, U+2060) and the byte-order mark (U+FEFF); and the line and paragraph
/// separators (U+2028, U+2029). Everything else (letters of any script, accents, emoji made of
/// visible code points) is printed as it is.
public enum TerminalSafe {
    /// `text` with every character a terminal would act on, or that hides or reorders text,
    /// written visibly (`\n`, `\r`, `\t`, `\u{1B}`); `"\u{1B}]0;x\u{07}"` becomes `\u{1B}]0;x\u{7}`.
    public static func text(_ text: String) -> String {
        // The common case, printable ASCII, comes back as it is without building a new string.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if needsEscape(scalar) {
                    result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }

    /// `text` made safe line by line: its line feeds are kept (text the tool itself laid out on
    /// several lines), and every other character is treated as by ``text(_:)``.
    public static func lines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { Self.text(String($0)) }.joined(separator: "\n")
    }

    /// Whether `scalar` is written as `\u{…}`: a control (Cc), a format character (Cf), or a line
    /// or paragraph separator (Zl, Zp).
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
