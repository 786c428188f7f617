import ArgumentParser
import FoundationEssentials
import Glibc
import LarderConfig
import LarderIO

/// Where the admin commands find the daemon: `--admin`, else the configuration's
/// `admin.listen` (from `--config`, `$LARDER_CONFIG` or /etc/larder/larder.toml), else the default.
struct AdminOptions: ParsableArguments {
    @Option(name: .customLong("admin"), help: "Admin address of the daemon, e.g. 127.0.0.1:3129.")
    var admin: String?

    @Option(name: .customLong("config"), help: "Configuration file to read the admin address and token from.")
    var configPath: String?

    @Option(
        name: .customLong("token"),
        help: "Bearer token for mutating calls (default: the configuration's admin token, as the daemon reads it).")
    var token: String?

    @Option(name: .customLong("token-file"), help: "Read the bearer token from this file instead.")
    var tokenFile: String?

    /// Where systemd keeps the running service's credentials (root only): the command line reads
    /// the token the daemon got from `LoadCredential=` there, so `${CREDENTIALS_DIRECTORY}` in
    /// the configuration means the same to `larder purge` as to the service.
    static let serviceCredentials = "/run/credentials/larder.service"

    /// The configuration, when a file applies.
    func loadConfig() throws -> Config {
        guard let path = configPath ?? ConfigLoader.defaultPath(environment: ProcessInfo.processInfo.environment) else {
            return Config()
        }
        if ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"] == nil, access(Self.serviceCredentials, F_OK) == 0 {
            setenv("CREDENTIALS_DIRECTORY", Self.serviceCredentials, 1)
        }
        switch ConfigLoader.load(path: path) {
        case .success(let config): return config
        case .failure(let errors):
            let hint =
                "\(errors)".contains("CREDENTIALS_DIRECTORY")
                ? "\n(the service's credentials are in \(Self.serviceCredentials) while it runs, for root; or pass --token or --token-file)"
                : ""
            // The file's own errors (FILE:LINE:COLUMN, or FILE: cannot read), then exit 1 as
            // serve and check-config do: not a usage error, whose banner would follow.
            printError("\(errors)\(hint)")
            printError("\(path): \(errors.errors.count) error\(errors.errors.count == 1 ? "" : "s")")
            throw ExitCode(1)
        }
    }

    func adminAddress() throws -> SocketAddress {
        if let admin {
            guard let address = SocketAddress(parsing: admin) else {
                throw ValidationError("--admin: '\(admin)' is not an address like 127.0.0.1:3129")
            }
            return address
        }
        guard let address = try loadConfig().admin.listen else {
            throw ValidationError("the admin listener is off in the configuration; pass --admin")
        }
        return address
    }

    /// GET `path` from ``adminAddress()`` (naming it in `Host`, which the admin listener
    /// checks): the body, or an error with the status when it is not 200.
    func get(_ path: String) throws -> (address: SocketAddress, body: [UInt8]) {
        let address = try adminAddress()
        let response = try BlockingHTTPClient(address: address, timeoutSeconds: 10, deadlineSeconds: 30).request(
            "GET", path, headers: [("Host", address.description)])
        guard response.status == 200 else {
            throw ValidationError("GET \(path) answered \(response.status): \(Text.trimmed(response.text))")
        }
        return (address, response.body)
    }

    /// The daemons to ask: every node of `cluster` (comma-separated admin addresses), else the
    /// one ``adminAddress()`` names.
    func targets(cluster: String?) throws -> [SocketAddress] {
        guard let cluster else { return [try adminAddress()] }
        return try cluster.split(separator: ",").map { item in
            guard let address = SocketAddress(parsing: Text.trimmed(item)) else {
                throw ValidationError("--cluster: '\(item)' is not an address like 10.0.0.1:3129")
            }
            return address
        }
    }

    func bearerToken() throws -> String {
        if let token { return token }
        if let tokenFile {
            do {
                let text = String(decoding: try FileSystem.readWhole(tokenFile, limit: 1 << 20), as: UTF8.self)
                return Text.trimmed(text)
            } catch {
                throw ValidationError("--token-file: cannot read '\(tokenFile)': \(error.message)")
            }
        }
        return try loadConfig().admin.token
    }
}

/// Human-readable sizes and counts for the command line.
enum Format {
    static func bytes(_ value: Double) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var number = value
        var unit = 0
        while number >= 1024 && unit < units.count - 1 {
            number /= 1024
            unit += 1
        }
        return unit == 0 ? "\(Int(number)) B" : "\(Text.oneDecimal(number)) \(units[unit])"
    }

    static func count(_ value: Int) -> String {
        Text.grouped(value)
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds)
        if total >= 86_400 { return "\(total / 86_400)d \(total % 86_400 / 3600)h" }
        if total >= 3600 { return "\(total / 3600)h \(total % 3600 / 60)m" }
        if total >= 60 { return "\(total / 60)m \(total % 60)s" }
        return "\(total)s"
    }
}
