import ArgumentParser
import Glibc
import LarderConfig
import LarderIO
import LarderTLS

/// `larder check-config FILE`: validates a configuration file without starting anything.
struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a configuration file and print every error with its position.",
        usage: "larder check-config [<options>] <file>",
        discussion: """
            Exit status 0 and a one-line summary when the file is valid; 1 and every
            error (FILE:LINE:COLUMN: message, the line, a caret) when it is not. With
            --explain, the effective route table too: the file's routes, then the
            presets' ([cache] presets).
            Example:
              larder check-config --explain /etc/larder/larder.toml
            """)

    @Flag(name: .customLong("explain"), help: "Also print the effective route table: each route, its settings and where it came from.")
    var explain = false

    @Option(name: .customLong("state-dir"), help: StateDirectoryOption.help)
    var stateDir: String?

    @Option(
        name: .customLong("cache-dir"),
        help: ArgumentHelp(
            "The disk cache directory serve is given, which wins over disk.path (default: $CACHE_DIRECTORY, else "
                + "\(ServedCacheDirectory.system) with the packaged unit's state directory, else disk.path)."))
    var cacheDir: String?

    @Argument(help: "The configuration file.")
    var file: String

    func validate() throws {
        if cacheDir?.isEmpty == true { throw ValidationError("--cache-dir is empty: name the disk cache's directory") }
    }

    func run() throws {
        let stateDirectory = StateDirectory.current(flag: stateDir, configPath: file)
        switch ConfigLoader.load(path: file, stateDirectory: stateDirectory) {
        case .success(var config):
            let variable = getenv("CACHE_DIRECTORY").map { String(cString: $0) }
            let served = ServedCacheDirectory.choose(
                flag: cacheDir, environment: variable.map { ["CACHE_DIRECTORY": $0] } ?? [:], stateDirectory: stateDirectory,
                workingDirectory: FileSystem.workingDirectory() ?? "/")
            let fromFile = config
            if let served { config.disk.path = served.path }
            let problems = LocalCA.problems(with: config.tls)
            guard problems.isEmpty else {
                print(Self.pathLines(config, stateDirectory: stateDirectory, served: served, file: file))
                for problem in problems { printError("\(file): \(problem)") }
                if !config.tls.intercept.isEmpty {
                    printError("\(file): \(Self.caHint(config, stateDirectory: stateDirectory, flag: stateDir, file: file))")
                }
                printError("\(file): \(problems.count) error\(problems.count == 1 ? "" : "s")")
                throw ExitCode(1)
            }
            print("\(file): OK: \(ConfigSummary.line(config))")
            print(Self.pathLines(config, stateDirectory: stateDirectory, served: served, file: file))
            if let served, fromFile.disk.path != stateDirectory.resolve(Config().disk.path),
                !Self.sameDirectory(fromFile.disk.path, served.path)
            {
                printError(
                    "\(file): warning: disk.path = \(fromFile.disk.path) is not used: serve is given --cache-dir \(served.path) "
                        + "(\(served.reason)), which wins over disk.path")
            }
            let restartOnly = ConfigKeyTable.restartChanges(
                from: ConfigLoader.embeddedDefaults(stateDirectory: stateDirectory), to: fromFile)
            if !restartOnly.isEmpty {
                print(
                    "\(file): note: a reload does not apply \(restartOnly.map(\.name).joined(separator: ", ")) (set here): "
                        + "a change to \(restartOnly.count == 1 ? "it" : "them") needs a restart")
            }
            for warning in Self.secretWarnings(config, file: file) { printError("\(file): warning: \(warning)") }
            let dangers = DangerousSettings.warnings(config, proxyListeners: config.proxy.listen, adminListener: config.admin.listen)
            let advice = Self.caHint(config, stateDirectory: stateDirectory, flag: stateDir, file: file)
            for warning in dangers + Self.caWarnings(config, advice: advice) { printError("\(file): warning: \(warning)") }
            let notes =
                Self.caNotes(config, stateDirectory: stateDirectory, flag: stateDir, file: file)
                + Self.interceptionNotes(config, advice: advice)
            for note in notes {
                print("\(file): note: \(note)")
            }
            if explain { print(Self.routeTable(config)) }
        case .failure(let errors):
            printError(errors.description)
            printError("\(file): \(errors.errors.count) error\(errors.errors.count == 1 ? "" : "s")")
            throw ExitCode(1)
        }
    }

    /// The state directory and the absolute path of each file or directory the configuration
    /// names: what `serve` reads with it (docs/OPERATIONS.md, "Paths").
    /// `served`: the `--cache-dir` serve is given, already in `config.disk.path`.
    static func pathLines(_ config: Config, stateDirectory: StateDirectory, served: (path: String, reason: String)?, file: String)
        -> String
    {
        var lines = ["\(file): relative paths resolve against \(stateDirectory.path) (\(stateDirectory.reason))"]
        for (key, path) in config.paths where !path.isEmpty {
            let why = key == "disk.path" ? served.map { " (\($0.reason), which wins over the file)" } ?? "" : ""
            lines.append("\(file): \(key) = \(path)\(why)\(access(path, F_OK) == 0 ? "" : " (not there yet)")")
        }
        return lines.joined(separator: "\n")
    }

    /// `ca init` for this file, from any directory, with the `--state-dir` this check was given.
    static func caInit(stateDirectory: StateDirectory, flag: String?, file: String) -> String {
        "larder ca init --config \(StateDirectory.absolute(file))" + (flag == nil ? "" : " --state-dir \(stateDirectory.path)")
    }

    /// How to replace the CA in `tls.ca_dir` that `tls.intercept` cannot use (one that is missing
    /// is no problem: serve makes it), where and as whom the service reads it.
    static func caHint(_ config: Config, stateDirectory: StateDirectory, flag: String?, file: String) -> String {
        let command = caInit(stateDirectory: stateDirectory, flag: flag, file: file) + " --rotate"
        let trust = "then make clients trust the new certificate (larder ca show prints how)"
        guard stateDirectory.path == StateDirectory.system else {
            return "serve reads the CA from \(config.tls.caDirectory); replace it with: \(command), \(trust)"
        }
        // Made by root, the key would be root's and the service's own user could not read it.
        let directory = config.tls.caDirectory
        return "serve reads the CA from \(directory) as the service's own user; replace it with: sudo mv \(directory) "
            + "\(directory).old-$(date +%Y%m%d%H%M%S) && sudo systemctl reload-or-restart larder (serve makes a new one as "
            + "that user; \(command) run as root would make a key the service cannot read), \(trust)"
    }

    /// Secrets others may read: a token or password-hash file readable by every user, or the
    /// configuration file itself when it holds them inline and is.
    static func secretWarnings(_ config: Config, file: String) -> [String] {
        var warnings: [String] = []
        func readableByOthers(_ path: String) -> UInt32? {
            guard let mode = try? FileSystem.permissions(of: path), mode & 0o004 != 0 else { return nil }
            return mode
        }
        for (key, path) in [("admin.token_file", config.admin.tokenFile), ("proxy.auth_users_file", config.proxy.authUsersFile)]
        where !path.isEmpty {
            if let mode = readableByOthers(path) {
                warnings.append("\(key) '\(path)' is readable by every user (mode \(String(mode, radix: 8))); chmod 0640 or 0600 it")
            }
        }
        let inline =
            (!config.admin.token.isEmpty && config.admin.tokenFile.isEmpty)
            || (!config.proxy.authUsers.isEmpty && config.proxy.authUsersFile.isEmpty)
        if inline, let mode = readableByOthers(file) {
            warnings.append(
                "this file holds admin.token or proxy.auth_users and is readable by every user (mode \(String(mode, radix: 8))); "
                    + "move them to admin.token_file / proxy.auth_users_file (systemd: LoadCredential=) or chmod 0640 it")
        }
        return warnings
    }

    /// Whether two paths name one directory: the same text, or (through a symbolic link) the
    /// same inode.
    static func sameDirectory(_ first: String, _ second: String) -> Bool {
        guard first != second else { return true }
        var one = stat()
        var other = stat()
        return stat(first, &one) == 0 && stat(second, &other) == 0 && one.st_dev == other.st_dev && one.st_ino == other.st_ino
    }

    /// A CA that serve takes but warns about: one made before the serverAuth limits.
    /// `advice`: ``caHint(_:stateDirectory:flag:file:)``'s.
    static func caWarnings(_ config: Config, advice: String) -> [String] {
        guard !config.tls.intercept.isEmpty, let facts = try? LocalCA.load(from: config.tls.caDirectory),
            facts.lacksServerOnlyLimits
        else { return [] }
        return ["\(LocalCA.rotateForLimits): \(advice)"]
    }

    /// A CA that `serve` will make (``LocalCA/provision(for:)``): where, so nobody makes one
    /// elsewhere by hand.
    static func caNotes(_ config: Config, stateDirectory: StateDirectory, flag: String?, file: String) -> [String] {
        guard LocalCA.provision(for: config.tls) != .nothing else { return [] }
        // Under the packaged unit only the service should make it: root's key would be root's.
        let byHand =
            stateDirectory.path == StateDirectory.system
            ? "" : " (or \(caInit(stateDirectory: stateDirectory, flag: flag, file: file)) now)"
        return ["\(config.tls.caDirectory) holds no CA: serve makes it at start or on a reload for tls.intercept, as its own user\(byHand)"]
    }

    /// For each preset, the HTTPS hosts it needs intercepted that `tls.intercept` does not list.
    /// `advice`: how to replace the CA (``caHint(_:stateDirectory:flag:file:)``).
    static func interceptionNotes(_ config: Config, advice: String) -> [String] {
        config.cache.presets.compactMap { preset in
            let missing = preset.tlsHosts.filter { !config.tls.intercepts(host: $0) }
            guard !missing.isEmpty else { return nil }
            // A CA already made permits only the hosts it was made for; none yet is made by serve.
            let hasCA = access(config.tls.caDirectory + "/" + LocalCA.certificateFile, F_OK) == 0
            return "preset \(preset.rawValue) caches HTTPS from \(missing.joined(separator: ", ")) only once tls.intercept lists "
                + (missing.count == 1 ? "it" : "them")
                + (hasCA ? " and the CA is replaced to permit \(missing.count == 1 ? "it" : "them") (\(advice))" : "")
        }
    }

    /// The effective routes, first match wins, with their settings and origin.
    static func routeTable(_ config: Config) -> String {
        guard !config.routes.isEmpty else { return "routes: none (every request uses [cache] default_policy)" }
        var lines = ["routes, in the order they are tried (first match wins):"]
        for (index, route) in config.routes.enumerated() {
            var settings: [String] = []
            if let methods = route.methods { settings.append("methods=\(methods.joined(separator: ","))") }
            settings.append("policy=\((route.policy ?? config.cache.defaultPolicy).rawValue)")
            if route.immutable { settings.append("immutable") }
            if let ttl = route.ttl { settings.append("ttl=\(Units.format(ttl))") }
            if let key = route.key { settings.append("key=\"\(key)\"") }
            if let digest = route.digest { settings.append("digest=\(digest.rawValue)") }
            if !route.ignoreQuery.isEmpty { settings.append("ignore_query=\(route.ignoreQuery.count) names") }
            if let parent = route.parent { settings.append("parent=\(parent)") }
            if let dedup = route.dedup { settings.append("dedup=\(dedup.rawValue)") }
            lines.append(
                "\(String(index + 1).leftPadded(4))  \(route.match.text)  \(settings.joined(separator: " "))  [\(route.source ?? "file")]")
        }
        return lines.joined(separator: "\n")
    }
}

/// A one-line description of a configuration.
enum ConfigSummary {
    static func line(_ config: Config) -> String {
        let listen = config.proxy.listen.map(\.description).joined(separator: ", ")
        let admin = config.admin.listen?.description ?? "off"
        return "proxy \(listen); admin \(admin); \(config.routes.count) route\(config.routes.count == 1 ? "" : "s"); "
            + "memory \(Units.format(bytes: Int64(config.memory.maxBytes))); "
            + "disk \(Units.format(bytes: config.disk.maxBytes)) at \(config.disk.path); "
            + "policy \(config.cache.defaultPolicy.rawValue)"
    }
}

/// Writes to stderr.
func printError(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}
