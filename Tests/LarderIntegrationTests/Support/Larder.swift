import Foundation

/// The real larder binary, started with a config file written by the test and listeners on
/// ephemeral ports; stopped with SIGTERM when the test drops it.
final class Larder {
    let child: ChildProcess
    let proxyPort: Int
    let adminPort: Int
    let directory: String
    let configPath: String

    /// Starts `larder serve` with `config` (TOML text) and `--listen 127.0.0.1:0`.
    init(config: String = "", listen: [String] = ["127.0.0.1:0"], environment: [String: String] = [:]) throws {
        directory = Paths.temporaryDirectory()
        configPath = directory + "/larder.toml"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        var arguments = ["serve", "--config", configPath, "--admin-listen", "127.0.0.1:0", "--cache-dir", directory + "/cache"]
        for address in listen { arguments += ["--listen", address] }
        var env = ["PATH": "/usr/bin:/bin"]
        env.merge(environment) { $1 }
        child = try ChildProcess(Paths.larder, arguments, environment: env)
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

    /// Replaces the config file (for reload tests).
    func rewriteConfig(_ text: String) throws {
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    @discardableResult
    func stop() -> Int32 { child.stop() }

    deinit {
        child.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
