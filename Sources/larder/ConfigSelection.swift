import ArgumentParser
import LarderConfig
import LarderIO

/// Which configuration file `serve` uses, and the command-line overrides applied on top of it
/// (also after every reload).
struct ConfigSelection {
    let path: String?
    let listen: [SocketAddress]
    let adminListen: SocketAddress?
    let cacheDir: String?
    /// What relative paths in the file resolve against, chosen once at start.
    let stateDirectory: StateDirectory

    var origin: ConfigLoader.Origin { path.map { .file($0) } ?? .embeddedDefaults }

    /// Loads the file (or the defaults) and applies the overrides.
    func load() -> Result<Config, ConfigErrors> {
        guard let path else { return .success(overridden(ConfigLoader.embeddedDefaults(stateDirectory: stateDirectory))) }
        return ConfigLoader.load(path: path, stateDirectory: stateDirectory).map(overridden)
    }

    private func overridden(_ loaded: Config) -> Config {
        var config = loaded
        if !listen.isEmpty { config.proxy.listen = listen }
        if let adminListen { config.admin.listen = adminListen }
        // A path on the command line means what it means to the shell: the working directory's.
        if let cacheDir { config.disk.path = StateDirectory.absolute(cacheDir) }
        return config
    }
}
