import ArgumentParser
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
        subcommands: [Serve.self, CheckConfig.self, Stats.self, List.self, Purge.self, Warm.self, HashPassword.self, CA.self],
        defaultSubcommand: Serve.self)
}
