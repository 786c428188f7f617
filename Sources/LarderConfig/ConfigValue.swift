/// A value in a configuration file, with where it was written.
public struct ConfigValue: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case string(String)
        case integer(Int)
        case float(Double)
        case boolean(Bool)
        case array([ConfigValue])
    }

    public let kind: Kind
    public let position: SourcePosition

    public init(_ kind: Kind, at position: SourcePosition) {
        self.kind = kind
        self.position = position
    }

    /// How the value reads in a message: `5`, `"5s"`, `true`, `an array`.
    public var summary: String {
        switch kind {
        case .string(let text): "\"\(text)\""
        case .integer(let value): "\(value)"
        case .float(let value): "\(value)"
        case .boolean(let value): "\(value)"
        case .array: "an array"
        }
    }
}

/// A `[table]` or one element of `[[array]]`: keys in order, with positions.
public struct ConfigTable: Sendable, Equatable {
    public let name: String
    public let position: SourcePosition
    public var entries: [(key: String, keyPosition: SourcePosition, value: ConfigValue)] = []
    /// Sub-tables such as `[route.retry]` belonging to this table.
    public var subtables: [ConfigTable] = []

    public init(name: String, position: SourcePosition) {
        self.name = name
        self.position = position
    }

    public static func == (a: ConfigTable, b: ConfigTable) -> Bool {
        a.name == b.name && a.position == b.position && a.subtables == b.subtables
            && a.entries.map(\.key) == b.entries.map(\.key) && a.entries.map(\.value) == b.entries.map(\.value)
    }
}

/// A parsed file: top-level keys (an error later, since every key lives in a section), the
/// tables in order, and the elements of each array of tables.
public struct ConfigDocument: Sendable {
    public var root = ConfigTable(name: "", position: SourcePosition(line: 1, column: 1))
    public var tables: [ConfigTable] = []
    public var arrays: [(name: String, elements: [ConfigTable])] = []
}
