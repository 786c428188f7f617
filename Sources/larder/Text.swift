/// The few text helpers the command line needs, without Foundation's internationalization
/// (which, linked statically, brings ICU's data: most of the binary's size).
enum Text {
    /// `text` without leading and trailing white space (space, tab, CR, LF) and `extra` characters.
    static func trimmed(_ text: some StringProtocol, also extra: Set<Character> = []) -> String {
        let drop: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" || extra.contains($0) }
        guard let first = text.firstIndex(where: { !drop($0) }), let last = text.lastIndex(where: { !drop($0) }) else { return "" }
        return String(text[first...last])
    }

    /// `text` with every control character but line feed and tab (C0, DEL, C1) written as
    /// `\u{1B}`, so text from a server cannot move a terminal's cursor, retitle it or ring it.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if (value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(value) {
                out += "\\u{\(String(value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `text`'s words in lines of at most `width` characters (a longer word has a line of its
    /// own): help paragraphs laid out here, not by the terminal's width.
    static func wrapped(_ text: String, width: Int = 76) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines.joined(separator: "\n")
    }

    /// `text` with the control characters a terminal acts on (C0, DEL; C1, which holds CSI and
    /// OSC) written out, `\xNN` and `\u{NN}`: stored URLs and a client's Vary'd headers are
    /// other people's text, and a damaged disk head anyone's bytes.
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            guard isControl(scalar) else {
                out.unicodeScalars.append(scalar)
                continue
            }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            let digits = hex.count < 2 ? "0" + hex : hex
            out += scalar.value < 0x80 ? "\\x\(digits)" : "\\u{\(digits)}"
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) }

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
