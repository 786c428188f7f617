import Foundation
import LarderServer

/// The real larder binary, started with a config file written by the test and listeners on
/// ephemeral ports; stopped with SIGTERM when the test drops it.
final class Larder {
    let child: ChildProcess
    let proxyPort: Int
    let adminPort: Int
    let directory: String
    let configPath: String

    /// The disk cache directory.
    let cacheDirectory: String
    private let ownsDirectory: Bool

    /// Starts `larder serve` with `config` (TOML text) and `--listen 127.0.0.1:0`. With
    /// `cacheDirectory`, the disk tier lives there (and survives this object, for restart tests);
    /// `launcher` runs it under another program (`taskset -c 0`); `adminListen` replaces the
    /// admin listener's address.
    init(
        config: String = "", listen: [String] = ["127.0.0.1:0"], environment: [String: String] = [:],
        cacheDirectory: String? = nil, launcher: [String] = [], adminListen: String = "127.0.0.1:0"
    ) throws {
        directory = Paths.temporaryDirectory()
        ownsDirectory = cacheDirectory == nil
        self.cacheDirectory = cacheDirectory ?? directory + "/cache"
        configPath = directory + "/larder.toml"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        var arguments = ["serve", "--config", configPath, "--admin-listen", adminListen, "--cache-dir", self.cacheDirectory]
        for address in listen { arguments += ["--listen", address] }
        var env = ["PATH": "/usr/bin:/bin"]
        env.merge(environment) { $1 }
        // A launcher (taskset, ...) execs the binary in its own process: the PID stays the one stopped.
        child = try ChildProcess(
            launcher.first ?? Paths.larder, launcher.dropFirst() + (launcher.isEmpty ? [] : [Paths.larder]) + arguments, environment: env)
        let text = try child.waitForOutput { $0.contains("listening") }
        func port(after key: String) -> Int? {
            guard let range = text.range(of: key) else { return nil }
            let rest = text[range.upperBound...]
            let value = rest.prefix { !$0.isWhitespace && $0 != "," }
            guard let colon = value.lastIndex(of: ":") else { return nil }
            return Int(value[value.index(after: colon)...])
        }
        guard let proxy = port(after: "proxy="), let admin = port(after: "admin=") else {
            throw TestFailure("no listening line: \(text)")
        }
        proxyPort = proxy
        adminPort = admin
    }

    var proxy: String { "http://127.0.0.1:\(proxyPort)" }

    /// The admin endpoint's counters, decoded as `larder stats` decodes them.
    func stats() throws -> StatsDocument {
        let result = try Curl.run(["http://127.0.0.1:\(adminPort)/stats"])
        do {
            return try StatsDocument.decode(Array(result.body))
        } catch {
            throw TestFailure("stats is not a stats document (\(error)): \(result.text)")
        }
    }

    /// Open client connections (tunnels included), from the stats.
    func activeConnections() throws -> Int { try stats().connections.active }

    /// Replaces the config file (for reload tests).
    func rewriteConfig(_ text: String) throws {
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Replaces the config file, sends SIGHUP and waits for the daemon to log the reload.
    func reload(_ text: String) throws {
        let before = child.stderr.components(separatedBy: "reloaded").count
        try rewriteConfig(text)
        child.signal(SIGHUP)
        _ = try child.waitForOutput { $0.components(separatedBy: "reloaded").count > before }
    }

    @discardableResult
    func stop() -> Int32 { child.stop() }

    /// Files under the cache's `v1/` (complete entries) or `tmp/` (fills in progress).
    func cacheFiles(_ subdirectory: String) -> [String] {
        let root = cacheDirectory + "/" + subdirectory
        var files: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let next = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + next, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(root + "/" + next)
            }
        }
        return files
    }

    deinit {
        child.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
