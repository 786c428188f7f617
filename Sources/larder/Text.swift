/// The few text helpers the command line needs, without Foundation's internationalization
/// (which, linked statically, brings ICU's data: most of the binary's size).
enum Text {
    /// `text` without leading and trailing white space (space, tab, CR, LF) and `extra` characters.
    static func trimmed(_ text: some StringProtocol, also extra: Set<Character> = []) -> String {
        let drop: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" || extra.contains($0) }
        guard let first = text.firstIndex(where: { !drop($0) }), let last = text.lastIndex(where: { !drop($0) }) else { return "" }
        return String(text[first...last])
    }

    /// `text` with every control character (C0, DEL; C1, which holds CSI and OSC) written as
    /// `\u{1B}`, so text from a server, a damaged disk head or another client's header cannot
    /// move a terminal's cursor, retitle it or ring it; so are the bidirectional controls. `keepingLines`: line feed and tab stay.
    static func printable(_ text: String, keepingLines: Bool = false) -> String {
        func written(_ scalar: Unicode.Scalar) -> Bool {
            let value = scalar.value
            // Bidirectional controls too: they reorder what follows them on the line (U+202E
            // shows a command backwards).
            if value == 0x061C || value == 0x200E || value == 0x200F || (0x202A...0x202E).contains(value)
                || (0x2066...0x2069).contains(value)
            {
                return true
            }
            guard value < 0x20 || (0x7F...0x9F).contains(value) else { return false }
            return !(keepingLines && (scalar == "\n" || scalar == "\t"))
        }
        guard text.unicodeScalars.contains(where: written) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if written(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `text` padded with spaces on the right to `width` characters (never cut).
    static func padded(_ text: String, to width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// `value` with one decimal, as `%.1f` writes it.
    static func oneDecimal(_ value: Double) -> String {
        guard value.isFinite else { return value.description }
        let tenths = Int((abs(value) * 10).rounded())
        return (value < 0 && tenths > 0 ? "-" : "") + "\(tenths / 10).\(tenths % 10)"
    }

    /// `value` with thousands separated by commas (`1,234,567`), as en_US writes it.
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return value < 0 ? "-" + out : out
    }
}
