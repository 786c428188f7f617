/// One configuration key: its type, its default as config/larder.toml writes it, its help
/// text (the file's comment for it) and its reload class. A restart key also knows how to keep
/// its running value in a loaded configuration, and how to show it.
public struct ConfigKeyEntry: Sendable {
    /// `section.key`, or `route.key` for a `[[route]]` key.
    public let name: String
    public let type: ConfigKeyType
    /// The default in the file's syntax (`"10s"`, `[443]`, `true`); empty for a route key,
    /// which falls back to its section's value.
    public let defaultValue: String
    /// What the key does, as config/larder.toml's comment for it says (one line).
    public let help: String
    public let reload: ReloadClass
    let keep: (@Sendable (inout Config, Config) -> Void)?
    let show: (@Sendable (Config) -> String)?

    static func live(_ name: String, _ type: ConfigKeyType, _ defaultValue: String, _ help: String) -> ConfigKeyEntry {
        ConfigKeyEntry(name: name, type: type, defaultValue: defaultValue, help: help, reload: .live, keep: nil, show: nil)
    }

    static func restart(
        _ name: String, _ type: ConfigKeyType, _ defaultValue: String, _ help: String,
        keep: @escaping @Sendable (inout Config, Config) -> Void, show: @escaping @Sendable (Config) -> String
    ) -> ConfigKeyEntry {
        ConfigKeyEntry(name: name, type: type, defaultValue: defaultValue, help: help, reload: .restart, keep: keep, show: show)
    }

    /// A `[[route]]` key: a reload rebuilds the route table.
    static func route(_ key: String, _ type: ConfigKeyType, _ help: String) -> ConfigKeyEntry {
        .live("route." + key, type, "", help)
    }

    /// This key's value in `config`, as a message shows it (restart keys only).
    public func value(in config: Config) -> String { show?(config) ?? "" }
}
