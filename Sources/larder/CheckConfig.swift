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
        discussion: """
            Exit status 0 and a one-line summary when the file is valid; 1 and every error
            (FILE:LINE:COLUMN: message, the line, a caret) when it is not.
            Example:
              larder check-config /etc/larder/larder.toml
            """)

    @Argument(help: "The configuration file.")
    var file: String

    func run() throws {
        switch ConfigLoader.load(path: file) {
        case .success(let config):
            let problems = LocalCA.problems(with: config.tls)
            guard problems.isEmpty else {
                for problem in problems { printError("\(file): \(problem)") }
                printError("\(file): \(problems.count) error\(problems.count == 1 ? "" : "s")")
                throw ExitCode(1)
            }
            print("\(file): OK: \(ConfigSummary.line(config))")
        case .failure(let errors):
            printError(errors.description)
            printError("\(file): \(errors.errors.count) error\(errors.errors.count == 1 ? "" : "s")")
            throw ExitCode(1)
        }
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
