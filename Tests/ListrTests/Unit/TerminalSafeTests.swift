import Testing
import ToolSupport

@Suite("TerminalSafe: nothing untrusted reaches a terminal raw")
struct TerminalSafeTests {
    @Test("printable text of any script comes back as it is")
    func plainText() {
        #expect(TerminalSafe.text("Milk") == "Milk")
        #expect(TerminalSafe.text("Brown bread, 2 × 500 g") == "Brown bread, 2 × 500 g")
        #expect(TerminalSafe.text("Grüße, 日本語, 🥛") == "Grüße, 日本語, 🥛")
        #expect(TerminalSafe.text("") == "")
    }

    @Test("escape sequences are written visibly: OSC to set the title, CSI to clear the screen, BEL")
    func escapeSequences() {
        #expect(TerminalSafe.text("\u{1B}]0;PWNED\u{07}") == "\\u{1B}]0;PWNED\\u{7}")
        #expect(TerminalSafe.text("\u{1B}[2J\u{1B}[31mEVIL") == "\\u{1B}[2J\\u{1B}[31mEVIL")
        #expect(!TerminalSafe.text("a\u{1B}b\u{07}c\u{7F}d\u{9B}e").unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        #expect(TerminalSafe.text("\u{7F}") == "\\u{7F}")
        #expect(TerminalSafe.text("\u{9B}2J") == "\\u{9B}2J", "the 8-bit CSI (C1)")
        #expect(TerminalSafe.text("\u{0}") == "\\u{0}")
    }

    @Test("line breaks and tabs cannot forge a line: \\n, \\r and \\t are written as such")
    func lineBreaks() {
        #expect(TerminalSafe.text("Milk\nlistrctl 1 on vm added \"fake\" as item 2.") == "Milk\\nlistrctl 1 on vm added \"fake\" as item 2.")
        #expect(TerminalSafe.text("a\rb\tc") == "a\\rb\\tc")
        #expect(TerminalSafe.text("a\r\nb") == "a\\r\\nb")
        #expect(TerminalSafe.text("a\u{2028}b\u{2029}c\u{85}d") == "a\\u{2028}b\\u{2029}c\\u{85}d")
    }

    @Test("bidi overrides and isolates, zero-width characters and the byte-order mark are written visibly")
    func invisibleCharacters() {
        for value: UInt32 in [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
                              0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0xFEFF, 0x2060] {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let escaped = TerminalSafe.text("a" + String(Character(scalar)) + "b")
            #expect(escaped == "a\\u{\(String(value, radix: 16, uppercase: true))}b", "U+\(String(value, radix: 16, uppercase: true))")
        }
        #expect(TerminalSafe.text("invoice\u{202E}fdp.exe") == "invoice\\u{202E}fdp.exe")
    }

    @Test("lines(_:) keeps the text's own line feeds and escapes everything else on each line")
    func lines() {
        #expect(TerminalSafe.lines("[ ] Milk\n[✓] Bread") == "[ ] Milk\n[✓] Bread")
        #expect(TerminalSafe.lines("a\u{1B}[2J\nb\rc\n") == "a\\u{1B}[2J\nb\\rc\n")
        #expect(TerminalSafe.lines(TerminalSafe.text("x\ny\u{1B}")) == "x\\ny\\u{1B}", "escaping twice changes nothing more")
    }
}
