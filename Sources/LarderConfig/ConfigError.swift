/// One problem in a configuration file, reported like a compiler diagnostic:
///
/// ```
/// larder.toml:12:17: expected a duration like "5s", got 5
///   header_timeout = 5
///                    ^
/// ```
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public let file: String
    public let position: SourcePosition
    public let message: String
    /// The offending line, for the excerpt.
    public let lineText: String

    public init(file: String, position: SourcePosition, message: String, lineText: String) {
        self.file = file
        self.position = position
        self.message = message
        self.lineText = lineText
    }

    /// An error at a position whose column counts bytes of `source` (as the parser records
    /// them); the reported column counts characters, so the caret lines up on non-ASCII lines.
    public init(file: String, bytePosition: SourcePosition, message: String, source: [UInt8]) {
        let text = ConfigParser.lineText(source, line: bytePosition.line)
        let prefix = Array(text.utf8).prefix(max(0, bytePosition.column - 1))
        let column = String(decoding: prefix, as: UTF8.self).count + 1
        self.init(file: file, position: SourcePosition(line: bytePosition.line, column: column), message: message, lineText: text)
    }

    /// A problem with the file as a whole (it cannot be read): no line to point at.
    public static func wholeFile(_ file: String, message: String) -> ConfigError {
        ConfigError(file: file, position: SourcePosition(line: 0, column: 0), message: message, lineText: "")
    }

    /// Whether the error is about the whole file, not a place in it.
    public var isWholeFile: Bool { position.line == 0 }

    /// `FILE:LINE:COLUMN: message`, or `FILE: message` for the whole file.
    public var headline: String {
        isWholeFile ? "\(file): \(message)" : "\(file):\(position.line):\(position.column): \(message)"
    }

    /// The headline, then the line and a caret under the column (the headline alone for the
    /// whole file).
    public var description: String {
        guard !isWholeFile else { return headline }
        let caretPadding = String(repeating: " ", count: max(0, position.column - 1))
        let excerpt = lineText.replacingTabs()
        return "\(headline)\n  \(excerpt)\n  \(caretPadding)^"
    }
}

/// Every error found in one file (loading reports them all, not just the first).
public struct ConfigErrors: Error, Sendable, CustomStringConvertible {
    public let errors: [ConfigError]

    public init(_ errors: [ConfigError]) { self.errors = errors }

    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

extension String {
    /// Tabs as single spaces, so the caret lines up with the column (which counts a tab as one).
    fileprivate func replacingTabs() -> String {
        String(map { $0 == "\t" ? " " : $0 })
    }
}
