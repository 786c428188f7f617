/// Parses Larder's TOML-like configuration language into a ``ConfigDocument``.
///
/// The language: `#` comments; `[table]`, `[[array-of-tables]]` and `[parent.child]` (a
/// sub-table of the last `[[parent]]` element); `key = value` with basic strings (`"..."`, with
/// `\" \\ \b \t \n \f \r \uXXXX \UXXXXXXXX` escapes), literal strings (`'...'`), integers (with
/// `_` separators), floats, booleans and arrays (multi-line, trailing comma allowed). Dotted
/// keys, inline tables and multi-line strings are not part of it.
///
/// The parser is single-pass over bytes and linear in the input; array nesting is bounded, so
/// no input can exhaust the stack. After an error it skips to the next line and goes on, so one
/// run reports every independent mistake.
public struct ConfigParser {
    private let file: String
    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0
    private var errors: [ConfigError] = []
    private var document = ConfigDocument()
    private var target = Target.root
    private var seenTables: [String: SourcePosition] = [:]
    private var seenKeys: [String: SourcePosition] = [:]
    /// Deepest array nesting accepted.
    public static let maxDepth = 32

    private enum Target {
        case root
        case table(Int)
        case arrayElement(array: Int, element: Int)
        case subtable(array: Int, element: Int, subtable: Int)
        /// After a header in error: its keys are read, then dropped, never added to the table
        /// before it.
        case discarded
    }

    private struct Failure: Error {
        let message: String
        let position: SourcePosition
    }

    /// Parses `text`; errors carry `file` in their positions. A leading byte order mark is
    /// skipped, and columns count from after it.
    public static func parse(_ text: String, file: String) -> (document: ConfigDocument, errors: [ConfigError]) {
        var parser = ConfigParser(file: file, bytes: Array(withoutByteOrderMark(text).utf8))
        parser.run()
        return (parser.document, parser.errors)
    }

    /// `text` without the U+FEFF some editors put at the start of a UTF-8 file: TOML 1.0
    /// requires UTF-8 but does not forbid the mark, and it is no part of the first line.
    public static func withoutByteOrderMark(_ text: String) -> String {
        text.unicodeScalars.first == "\u{FEFF}" ? String(text.unicodeScalars.dropFirst()) : text
    }

    private init(file: String, bytes: [UInt8]) {
        self.file = file
        self.bytes = bytes
    }

    // MARK: Statements

    private mutating func run() {
        while index < bytes.count {
            skipSpaces()
            guard index < bytes.count else { break }
            let byte = bytes[index]
            if byte == UInt8(ascii: "#") || byte == 10 || byte == 13 {
                do {
                    try endOfLine()
                } catch {
                    record(error)
                    skipLine()
                }
                continue
            }
            do {
                if byte == UInt8(ascii: "[") {
                    // Until the header is read whole, its keys belong nowhere.
                    target = .discarded
                    try header()
                } else {
                    try keyValue()
                }
                try endOfLine()
            } catch {
                record(error)
                skipLine()
            }
        }
    }

    private mutating func header() throws(Failure) {
        let start = position
        index += 1
        let isArray = peek == UInt8(ascii: "[")
        if isArray { index += 1 }
        skipSpaces()
        var parts: [String] = []
        while true {
            let partStart = position
            let part = bareKey()
            guard !part.isEmpty else { throw Failure(message: "expected a table name", position: partStart) }
            parts.append(part)
            skipSpaces()
            if peek == UInt8(ascii: ".") {
                index += 1
                skipSpaces()
                continue
            }
            break
        }
        guard peek == UInt8(ascii: "]") else { throw Failure(message: "expected ']' to close the table header", position: position) }
        index += 1
        if isArray {
            guard peek == UInt8(ascii: "]") else {
                throw Failure(message: "expected ']]' to close the array-of-tables header", position: position)
            }
            index += 1
        }
        let name = parts.joined(separator: ".")
        seenKeys = [:]
        if isArray {
            guard parts.count == 1 else {
                throw Failure(message: "nested arrays of tables ([[\(name)]]) are not supported", position: start)
            }
            if let first = seenTables[name] {
                throw Failure(message: "[[\(name)]] conflicts with the table [\(name)] defined at line \(first.line)", position: start)
            }
            if let arrayIndex = document.arrays.firstIndex(where: { $0.name == name }) {
                document.arrays[arrayIndex].elements.append(ConfigTable(name: name, position: start))
                target = .arrayElement(array: arrayIndex, element: document.arrays[arrayIndex].elements.count - 1)
            } else {
                document.arrays.append((name, [ConfigTable(name: name, position: start)]))
                target = .arrayElement(array: document.arrays.count - 1, element: 0)
            }
            return
        }
        if parts.count == 2 {
            // [route.retry]: a sub-table of the last [[route]] element.
            guard let arrayIndex = document.arrays.firstIndex(where: { $0.name == parts[0] }) else {
                throw Failure(
                    message: "[\(name)] must follow a [[\(parts[0])]] entry it belongs to", position: start)
            }
            let element = document.arrays[arrayIndex].elements.count - 1
            if document.arrays[arrayIndex].elements[element].subtables.contains(where: { $0.name == parts[1] }) {
                throw Failure(message: "duplicate table [\(name)] in this [[\(parts[0])]] entry", position: start)
            }
            document.arrays[arrayIndex].elements[element].subtables.append(ConfigTable(name: parts[1], position: start))
            target = .subtable(
                array: arrayIndex, element: element,
                subtable: document.arrays[arrayIndex].elements[element].subtables.count - 1)
            return
        }
        guard parts.count == 1 else { throw Failure(message: "table names have at most two parts", position: start) }
        if let first = seenTables[name], let table = document.tables.firstIndex(where: { $0.name == name }) {
            // TOML defines a table once. The keys that follow still go to the first one, so
            // each is checked against the table it was written under (and a key given in both
            // halves is a duplicate there).
            target = .table(table)
            for entry in document.tables[table].entries { seenKeys[entry.key] = entry.keyPosition }
            throw Failure(
                message: "duplicate table [\(name)] (first defined at line \(first.line)); a table is defined once: "
                    + "move these keys under the first [\(name)]",
                position: start)
        }
        if document.arrays.contains(where: { $0.name == name }) {
            throw Failure(message: "[\(name)] is an array of tables here; write [[\(name)]]", position: start)
        }
        seenTables[name] = start
        document.tables.append(ConfigTable(name: name, position: start))
        target = .table(document.tables.count - 1)
    }

    private mutating func keyValue() throws(Failure) {
        let keyPosition = position
        let key = bareKey()
        guard !key.isEmpty else {
            throw Failure(message: "expected a key (letters, digits, '_' or '-') or a [table] header", position: keyPosition)
        }
        skipSpaces()
        if peek == UInt8(ascii: ".") {
            throw Failure(message: "dotted keys are not supported; put '\(key)' keys in a [\(key)] table", position: position)
        }
        guard peek == UInt8(ascii: "=") else { throw Failure(message: "expected '=' after key '\(key)'", position: position) }
        index += 1
        skipSpaces()
        let value = try parseValue(depth: 0)
        if let first = seenKeys[key] {
            throw Failure(message: "duplicate key '\(key)' (first defined at line \(first.line))", position: keyPosition)
        }
        seenKeys[key] = keyPosition
        let entry = (key: key, keyPosition: keyPosition, value: value)
        switch target {
        case .root:
            document.root.entries.append(entry)
        case .table(let table):
            document.tables[table].entries.append(entry)
        case .arrayElement(let array, let element):
            document.arrays[array].elements[element].entries.append(entry)
        case .subtable(let array, let element, let subtable):
            document.arrays[array].elements[element].subtables[subtable].entries.append(entry)
        case .discarded:
            break
        }
    }

    // MARK: Values

    private mutating func parseValue(depth: Int) throws(Failure) -> ConfigValue {
        let start = position
        guard let byte = peek, byte != 10, byte != 13, byte != UInt8(ascii: "#") else {
            throw Failure(message: "expected a value", position: start)
        }
        switch byte {
        case UInt8(ascii: "\""):
            if matches("\"\"\"") { throw Failure(message: "multi-line strings are not supported", position: start) }
            return ConfigValue(.string(try basicString()), at: start)
        case UInt8(ascii: "'"):
            if matches("'''") { throw Failure(message: "multi-line strings are not supported", position: start) }
            return ConfigValue(.string(try literalString()), at: start)
        case UInt8(ascii: "["):
            return try array(depth: depth + 1, start: start)
        case UInt8(ascii: "{"):
            throw Failure(message: "inline tables are not supported; use a [table] section", position: start)
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            let word = bareKey()
            if word == "true" { return ConfigValue(.boolean(true), at: start) }
            if word == "false" { return ConfigValue(.boolean(false), at: start) }
            throw Failure(message: "expected a value; strings need quotes (\"\(word)\")", position: start)
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try number(start: start)
        default:
            let word = bareKey()
            if !word.isEmpty {
                throw Failure(message: "expected a value; strings need quotes (\"\(word)\")", position: start)
            }
            throw Failure(message: "expected a value", position: start)
        }
    }

    private mutating func array(depth: Int, start: SourcePosition) throws(Failure) -> ConfigValue {
        guard depth <= ConfigParser.maxDepth else {
            throw Failure(message: "arrays nested more than \(ConfigParser.maxDepth) deep", position: start)
        }
        index += 1  // [
        var elements: [ConfigValue] = []
        while true {
            try skipArraySpace()
            guard let byte = peek else { throw Failure(message: "unterminated array (missing ']')", position: start) }
            if byte == UInt8(ascii: "]") {
                index += 1
                return ConfigValue(.array(elements), at: start)
            }
            elements.append(try parseValue(depth: depth))
            try skipArraySpace()
            guard let next = peek else { throw Failure(message: "unterminated array (missing ']')", position: start) }
            if next == UInt8(ascii: ",") {
                index += 1
            } else if next != UInt8(ascii: "]") {
                throw Failure(message: "expected ',' or ']' in array", position: position)
            }
        }
    }

    /// Whitespace, newlines and comments inside an array.
    private mutating func skipArraySpace() throws(Failure) {
        while let byte = peek {
            if byte == 32 || byte == 9 {
                index += 1
            } else if byte == 13 {
                guard index + 1 < bytes.count, bytes[index + 1] == 10 else {
                    throw Failure(message: "bare carriage return", position: position)
                }
                index += 1
            } else if byte == 10 {
                index += 1
                newLine()
            } else if byte == UInt8(ascii: "#") {
                while let next = peek, next != 10 { index += 1 }
            } else {
                return
            }
        }
    }

    private mutating func number(start: SourcePosition) throws(Failure) -> ConfigValue {
        var text: [UInt8] = []
        var isFloat = false
        var previousWasDigit = false
        while let byte = peek {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                text.append(byte)
                previousWasDigit = true
            case UInt8(ascii: "_"):
                guard previousWasDigit, let next = peekAt(1), (48...57).contains(next) else {
                    throw Failure(message: "'_' in a number must sit between digits", position: position)
                }
                previousWasDigit = false
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"):
                isFloat = true
                text.append(byte)
                previousWasDigit = false
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                guard text.isEmpty || text.last == UInt8(ascii: "e") || text.last == UInt8(ascii: "E") else {
                    throw Failure(message: "malformed number", position: start)
                }
                text.append(byte)
                previousWasDigit = false
            default:
                if ASCIIKey.isBareKeyByte(byte) {
                    throw Failure(message: "malformed number; durations and sizes are strings (\"5s\", \"10MiB\")", position: start)
                }
                return try finishNumber(text, isFloat: isFloat, start: start)
            }
            index += 1
        }
        return try finishNumber(text, isFloat: isFloat, start: start)
    }

    private func finishNumber(_ text: [UInt8], isFloat: Bool, start: SourcePosition) throws(Failure) -> ConfigValue {
        let string = String(decoding: text, as: UTF8.self)
        if isFloat {
            guard let value = Double(string), value.isFinite, string.last.map({ $0.isNumber }) == true else {
                throw Failure(message: "malformed number '\(string)'", position: start)
            }
            return ConfigValue(.float(value), at: start)
        }
        let digits = string.drop { $0 == "+" || $0 == "-" }
        if digits.count > 1 && digits.first == "0" {
            throw Failure(message: "leading zeros are not allowed in '\(string)'", position: start)
        }
        guard let value = Int(string) else {
            throw Failure(message: "integer '\(string)' is out of range", position: start)
        }
        return ConfigValue(.integer(value), at: start)
    }

    private mutating func basicString() throws(Failure) -> String {
        let start = position
        index += 1
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        func flushRaw() {
            scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
            raw.removeAll()
        }
        while let byte = peek {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                flushRaw()
                return String(scalars)
            case UInt8(ascii: "\\"):
                flushRaw()
                guard let escape = peek else { break }
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "u"), UInt8(ascii: "U"):
                    let count = escape == UInt8(ascii: "u") ? 4 : 8
                    let escapePosition = SourcePosition(line: line, column: column(of: index - 2))
                    guard index + count <= bytes.count,
                        let value = UInt32(String(decoding: bytes[index..<(index + count)], as: UTF8.self), radix: 16),
                        let scalar = Unicode.Scalar(value)
                    else {
                        throw Failure(message: "invalid unicode escape", position: escapePosition)
                    }
                    scalars.append(scalar)
                    index += count
                default:
                    throw Failure(
                        message: "unknown escape '\\\(Character(Unicode.Scalar(escape)))'",
                        position: SourcePosition(line: line, column: column(of: index - 2)))
                }
            case 10, 13:
                throw Failure(message: "unterminated string", position: start)
            default:
                if byte < 0x20 && byte != 9 || byte == 0x7F {
                    throw Failure(
                        message: "control character in string", position: SourcePosition(line: line, column: column(of: index - 1)))
                }
                raw.append(byte)
            }
        }
        throw Failure(message: "unterminated string", position: start)
    }

    private mutating func literalString() throws(Failure) -> String {
        let start = position
        index += 1
        let contentStart = index
        while let byte = peek {
            if byte == UInt8(ascii: "'") {
                let text = String(decoding: bytes[contentStart..<index], as: UTF8.self)
                index += 1
                return text
            }
            if byte == 10 || byte == 13 { break }
            if byte < 0x20 && byte != 9 || byte == 0x7F {
                throw Failure(message: "control character in string", position: position)
            }
            index += 1
        }
        throw Failure(message: "unterminated string", position: start)
    }

    // MARK: Lexical helpers

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func peekAt(_ offset: Int) -> UInt8? {
        index + offset < bytes.count ? bytes[index + offset] : nil
    }

    private func matches(_ text: String) -> Bool {
        let pattern = Array(text.utf8)
        return index + pattern.count <= bytes.count && Array(bytes[index..<(index + pattern.count)]) == pattern
    }

    private mutating func bareKey() -> String {
        let start = index
        while let byte = peek, ASCIIKey.isBareKeyByte(byte) { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func skipSpaces() {
        while let byte = peek, byte == 32 || byte == 9 { index += 1 }
    }

    /// After a statement: spaces, an optional comment, then a newline or the end.
    private mutating func endOfLine() throws(Failure) {
        skipSpaces()
        if peek == UInt8(ascii: "#") {
            while let byte = peek, byte != 10 {
                if byte == 13, peekAt(1) == 10 { break }
                if byte < 0x20 && byte != 9 && byte != 13 || byte == 0x7F {
                    throw Failure(message: "control character in comment", position: position)
                }
                index += 1
            }
        }
        guard let byte = peek else { return }
        if byte == 13 {
            guard peekAt(1) == 10 else { throw Failure(message: "bare carriage return", position: position) }
            index += 1
        }
        guard peek == 10 else {
            throw Failure(message: "unexpected text after the value; one key = value per line", position: position)
        }
        index += 1
        newLine()
    }

    private mutating func skipLine() {
        while let byte = peek, byte != 10 { index += 1 }
        if peek == 10 {
            index += 1
            newLine()
        }
    }

    private mutating func newLine() {
        line += 1
        lineStart = index
    }

    /// Positions hold byte columns while parsing (O(1) to take); ``ConfigError/init(file:bytePosition:message:source:)``
    /// turns them into character columns for the few that are reported.
    private var position: SourcePosition { SourcePosition(line: line, column: index - lineStart + 1) }

    private func column(of offset: Int) -> Int { offset - lineStart + 1 }

    /// More than this many errors and parsing stops: the file is not the config it claims to be.
    static let maxErrors = 50

    private mutating func record(_ failure: Failure) {
        if errors.count >= ConfigParser.maxErrors {
            index = bytes.count
            return
        }
        errors.append(ConfigError(file: file, bytePosition: failure.position, message: failure.message, source: bytes))
    }

    /// The text of a 1-based line, without its line break.
    static func lineText(_ bytes: [UInt8], line: Int) -> String {
        var current = 1
        var start = 0
        var index = 0
        while index < bytes.count, current < line {
            if bytes[index] == 10 {
                current += 1
                start = index + 1
            }
            index += 1
        }
        var end = start
        while end < bytes.count, bytes[end] != 10, bytes[end] != 13 { end += 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}

enum ASCIIKey {
    @inline(__always)
    static func isBareKeyByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "-")
    }
}
