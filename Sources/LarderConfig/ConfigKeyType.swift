/// How a configuration key's value is written: what config/larder.toml's default shows and
/// the decoder takes. The decoder checks ranges and the rest; a test holds each key's type to
/// its documented default and to the decoder's refusals.
public enum ConfigKeyType: Sendable, Equatable {
    case string
    /// A string naming a file or directory (relative paths resolve against the state directory).
    case path
    case bool
    case integer
    /// An integer or a decimal.
    case number
    /// A string with a unit (``Units/duration(_:)``).
    case duration
    /// A string with a unit (``Units/size(_:)``).
    case size
    case list
    /// One of these words.
    case choice([String])
    /// "auto", or a number of things.
    case integerOrAuto
    /// "auto", or true or false.
    case boolOrAuto

    /// The words of an enum whose raw values are what the file writes.
    static func choice<Words: RawRepresentable & CaseIterable>(of words: Words.Type) -> ConfigKeyType where Words.RawValue == String {
        .choice(words.allCases.map(\.rawValue))
    }

    /// Whether `value` is written the way this type takes it.
    public func admits(_ value: ConfigValue.Kind) -> Bool {
        switch (self, value) {
        case (.string, .string), (.path, .string), (.bool, .boolean), (.integer, .integer), (.list, .array): true
        case (.number, .float), (.number, .integer), (.integerOrAuto, .integer), (.boolOrAuto, .boolean): true
        case (.duration, .string(let text)): Units.duration(text) != nil
        case (.size, .string(let text)): Units.size(text) != nil
        case (.choice(let words), .string(let text)): words.contains(text)
        case (.integerOrAuto, .string(let text)), (.boolOrAuto, .string(let text)): text == "auto"
        default: false
        }
    }
}
