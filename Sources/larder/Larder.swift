import ArgumentParser

/// The `larder` command line.
@main
struct Larder: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "A caching HTTP forward proxy.",
        discussion: """
            Point HTTP_PROXY at it and repeated downloads come from the cache:

              larder serve                                  # defaults: proxy 127.0.0.1:3128, admin 127.0.0.1:3129
              larder serve --listen 0.0.0.0:3128 --cache-dir /var/cache/larder
              curl -x http://127.0.0.1:3128 http://example.org/
            """,
        version: "larder \(version)",
        subcommands: [Serve.self, CheckConfig.self],
        defaultSubcommand: Serve.self)
}
