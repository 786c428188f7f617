import Glibc
import LarderIO

/// The one directory every relative path in a configuration resolves against (`tls.ca_dir`,
/// `disk.path`, `log.access_file`, `admin.token_file`, ...), chosen the same way by `serve`,
/// reload, `check-config`, `ca init` and `ca show`, so that a command run from a shell sees the
/// files the service uses (docs/OPERATIONS.md, "Paths").
///
/// The order: `--state-dir`; `$STATE_DIRECTORY`, which systemd sets for a unit with
/// `StateDirectory=`; `/var/lib/larder` for a file in `/etc/larder/`, the packaged unit's
/// state directory (its configuration directory is read-only to the service); the file's own
/// directory for any other file; the working directory when no file is read.
public struct StateDirectory: Sendable, Equatable, CustomStringConvertible {
    /// An absolute path, without a trailing slash.
    public let path: String
    /// Why this directory, for `check-config` and the start-up line.
    public let reason: String

    /// The packaged service's state directory (`StateDirectory=larder`).
    public static let system = "/var/lib/larder"
    /// Configuration files in this directory belong to the packaged service.
    public static let systemConfigDirectory = "/etc/larder"

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path) (\(reason))" }

    /// The state directory for a command given `flag` (`--state-dir`), the configuration file
    /// it reads (nil: the embedded defaults), its environment and working directory.
    public static func choose(flag: String?, configPath: String?, environment: [String: String], workingDirectory: String)
        -> StateDirectory
    {
        if let flag, !flag.isEmpty {
            return StateDirectory(path: absolute(flag, against: workingDirectory), reason: "--state-dir")
        }
        // systemd may list several directories, separated by colons; the first is the unit's own.
        if let variable = environment["STATE_DIRECTORY"], let first = variable.split(separator: ":").first, first.hasPrefix("/") {
            return StateDirectory(path: absolute(String(first), against: "/"), reason: "$STATE_DIRECTORY")
        }
        guard let configPath else {
            return StateDirectory(path: absolute(".", against: workingDirectory), reason: "the working directory; no configuration file")
        }
        let file = absolute(configPath, against: workingDirectory)
        let directory = parent(of: file)
        if directory == systemConfigDirectory {
            return StateDirectory(path: system, reason: "the service's state directory, for a file in \(systemConfigDirectory)")
        }
        return StateDirectory(path: directory, reason: "the configuration file's directory")
    }

    /// ``choose(flag:configPath:environment:workingDirectory:)`` for this process.
    public static func current(flag: String? = nil, configPath: String?) -> StateDirectory {
        let variable = getenv("STATE_DIRECTORY").map { String(cString: $0) }
        return choose(
            flag: flag, configPath: configPath, environment: variable.map { ["STATE_DIRECTORY": $0] } ?? [:],
            workingDirectory: FileSystem.workingDirectory() ?? "/")
    }

    /// `path` made absolute against this directory (an absolute path is only normalized).
    public func resolve(_ path: String) -> String {
        Self.absolute(path, against: self.path)
    }

    /// `path` against this process's working directory, as a path given on its command line.
    public static func absolute(_ path: String) -> String {
        absolute(path, against: FileSystem.workingDirectory() ?? "/")
    }

    /// `path` against `base`, with `.`, `..` and repeated slashes removed (lexically: a
    /// symbolic link is not followed, as the kernel would not for a path it is handed).
    public static func absolute(_ path: String, against base: String) -> String {
        let joined = path.hasPrefix("/") ? path : base + "/" + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
