import ArgumentParser
import Glibc
import LarderConfig
import LarderServer

/// The `larder` command line.
@main
struct Larder: ParsableCommand {
    static let version = Version.larder

    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "A caching HTTP forward proxy.",
        discussion: """
            Point HTTP_PROXY at it and repeated downloads come from the cache:

              larder serve                                  # defaults: proxy 127.0.0.1:3128, admin 127.0.0.1:3129
              larder serve --config /etc/larder/larder.toml --cache-dir /var/cache/larder
              larder check-config /etc/larder/larder.toml
              curl -x http://127.0.0.1:3128 http://example.org/
              larder stats                                  # counters from the admin listener
              larder purge http://example.org/
              larder warm --file urls.txt                   # prefetch into the cache
              larder hash-password alice                    # a proxy.auth_users entry
            """,
        version: "larder \(version)",
        subcommands: [
            Serve.self, CheckConfig.self, Stats.self, List.self, Purge.self, Warm.self, HashPassword.self, CA.self, TLS.self, Client.self,
        ],
        defaultSubcommand: Serve.self)

    /// `serve` is the default subcommand, so a mistyped one ("larder stat") would otherwise be
    /// taken as an argument to `serve` and answered with its usage. A first word that names no
    /// subcommand and is no option is refused here, with the nearest name.
    static func main() {
        let names = configuration.subcommands.map { $0._commandName } + ["help"]
        if let first = CommandLine.arguments.dropFirst().first, !first.hasPrefix("-"), !names.contains(first) {
            let hint = Suggestions.closest(to: first, in: names).map { " Did you mean '\($0)'?" } ?? ""
            printError("larder: unknown command '\(first)'.\(hint) Commands: \(names.dropLast().joined(separator: ", ")).")
            Glibc.exit(64)  // EX_USAGE, as the argument parser's own usage errors
        }
        main(nil)
    }
}
