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
        if let cacheDir { config.disk.path = StateDirectory.absolute(cacheDir, against: FileSystem.workingDirectory() ?? "/") }
        return config
    }

    /// Settings that only take effect at start-up and that differ between `old` and `new`.
    static func restartOnlyChanges(from old: Config, to new: Config) -> [String] {
        var changed: [String] = []
        if old.proxy.listen != new.proxy.listen { changed.append("proxy.listen") }
        if old.admin.listen != new.admin.listen { changed.append("admin.listen") }
        if old.proxy.workers != new.proxy.workers { changed.append("proxy.workers") }
        if old.disk.path != new.disk.path { changed.append("disk.path") }
        if old.log.accessFile != new.log.accessFile { changed.append("log.access_file") }
        return changed
    }

    /// `new` with the start-up-only settings kept as they are running.
    static func keepingRestartOnly(_ new: Config, from running: Config) -> Config {
        var config = new
        config.proxy.listen = running.proxy.listen
        config.admin.listen = running.admin.listen
        config.proxy.workers = running.proxy.workers
        config.disk.path = running.disk.path
        config.log.accessFile = running.log.accessFile
        return config
    }
}
