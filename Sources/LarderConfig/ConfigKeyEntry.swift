/// One configuration key and its reload class. A restart key also knows how to keep its
/// running value in a loaded configuration, and how to show it.
public struct ConfigKeyEntry: Sendable {
    /// `section.key`, or `route.key` for a `[[route]]` key.
    public let name: String
    public let reload: ReloadClass
    let keep: (@Sendable (inout Config, Config) -> Void)?
    let show: (@Sendable (Config) -> String)?

    static func live(_ name: String) -> ConfigKeyEntry { ConfigKeyEntry(name: name, reload: .live, keep: nil, show: nil) }

    static func restart(
        _ name: String, keep: @escaping @Sendable (inout Config, Config) -> Void, show: @escaping @Sendable (Config) -> String
    ) -> ConfigKeyEntry {
        ConfigKeyEntry(name: name, reload: .restart, keep: keep, show: show)
    }

    /// This key's value in `config`, as a message shows it (restart keys only).
    public func value(in config: Config) -> String { show?(config) ?? "" }
}
