import Glibc
import LarderIO

/// Reads configuration files and decides which one applies.
public enum ConfigLoader {
    /// Where a configuration came from, for the start-up log line.
    public enum Origin: Sendable, Equatable, CustomStringConvertible {
        case file(String)
        case embeddedDefaults

        public var description: String {
            switch self {
            case .file(let path): path
            case .embeddedDefaults: "embedded defaults"
            }
        }
    }

    /// The system-wide default path.
    public static let systemPath = "/etc/larder/larder.toml"

    /// The file to use when none is named on the command line: `$LARDER_CONFIG`, then
    /// `/etc/larder/larder.toml` if it exists, else none (embedded defaults).
    public static func defaultPath(environment: [String: String]) -> String? {
        if let path = environment["LARDER_CONFIG"], !path.isEmpty { return path }
        if access(systemPath, F_OK) == 0 { return systemPath }
        return nil
    }

    /// Parses and checks configuration text. An empty text gives exactly the defaults. With
    /// `stateDirectory`, relative paths are resolved against it (the files a key names are read
    /// from there); without, they are left as written.
    public static func parse(_ text: String, file: String, stateDirectory: StateDirectory? = nil) -> Result<Config, ConfigErrors> {
        let text = ConfigParser.withoutByteOrderMark(text)
        let (document, syntaxErrors) = ConfigParser.parse(text, file: file)
        var decoder = ConfigDecoder(file: file, source: Array(text.utf8))
        decoder.stateDirectory = stateDirectory
        var config = decoder.decode(document)
        if let stateDirectory { config = config.resolvingPaths(against: stateDirectory) }
        let errors = (syntaxErrors + decoder.errors).sorted { $0.position < $1.position }
        return errors.isEmpty ? .success(config) : .failure(ConfigErrors(errors))
    }

    /// The embedded defaults, their relative paths resolved against `stateDirectory` (by
    /// default, the one chosen for a process that reads no file).
    public static func embeddedDefaults(stateDirectory: StateDirectory? = nil) -> Config {
        Config().resolvingPaths(against: stateDirectory ?? StateDirectory.current(configPath: nil))
    }

    /// Reads and parses the file at `path`, resolving its relative paths against
    /// `stateDirectory` (by default ``StateDirectory/current(flag:configPath:)`` for it).
    public static func load(path: String, stateDirectory: StateDirectory? = nil) -> Result<Config, ConfigErrors> {
        // An empty name (`--config ""`, an unset variable) would read as ": cannot read".
        guard !path.isEmpty else { return .failure(ConfigErrors([.wholeFile("\"\"", message: "the configuration file's name is empty")])) }
        let text: String
        do {
            text = String(decoding: try FileSystem.readWhole(path, limit: 16 << 20), as: UTF8.self)
        } catch {
            return .failure(ConfigErrors([.wholeFile(path, message: "cannot read: \(error.message)")]))
        }
        return parse(text, file: path, stateDirectory: stateDirectory ?? StateDirectory.current(configPath: path))
    }
}
