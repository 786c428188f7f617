import ArgumentParser
import FoundationEssentials
import LarderConfig
import LarderIO
import LarderServer

/// `larder ls [PREFIX]`: what the cache holds under a prefix, from one daemon or every node
/// of a cluster.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List cached entries under a URL or key prefix (size, ttl, key, URL).",
        usage: "larder ls [<options>] [<prefix>]",
        discussion: """
            Sends GET /cache?prefix=…&limit=… to the admin listener (with the bearer
            token when one is configured: URLs can carry credentials). Sizes are body
            bytes in memory, else bytes on disk; age and ttl (freshness left as a hit
            is served now, under the route's policy) in seconds, a negative ttl is
            stale, "reval" is revalidated with the origin before every use (policy
            revalidate: package indexes); hits since the daemon started. A URL
            prefix also lists what routes keep under keys of their own (debian:/…):
            the key, then the URL fetched when it is not the key. A key prefix
            (debian:, sha256:) lists keys.
            Examples:
              larder ls https://files.pythonhosted.org/packages/
              larder ls debian:/debian/pool/
              larder ls --limit 1000 --cluster 10.0.0.1:3129,10.0.0.2:3129 \\
                http://deb.debian.org/
            """)

    @OptionGroup var options: AdminOptions

    @Option(name: .customLong("cluster"), help: "Comma-separated admin addresses of every cluster node: list each.")
    var cluster: String?

    @Option(name: .customLong("limit"), help: "At most this many entries per daemon (1-10000).")
    var limit = 100

    @Flag(name: .customLong("json"), help: "Print each daemon's answer as it came.")
    var json = false

    @Argument(help: "A URL prefix or a key prefix (default: everything).")
    var prefix = ""

    func validate() throws {
        guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
        if !prefix.isEmpty { try Purge.checkTarget(prefix) }
    }

    func run() throws {
        var failed = 0
        let targets = try options.targets(cluster: cluster)
        let token = try options.bearerToken()
        for target in targets {
            var headers = [("Host", target.description)]
            if !token.isEmpty { headers.append(("Authorization", "Bearer \(token)")) }
            do {
                let response = try BlockingHTTPClient(address: target, timeoutSeconds: 60, deadlineSeconds: 120).request(
                    "GET", "/cache?prefix=\(Purge.encode(prefix))&limit=\(limit)", headers: headers)
                guard response.status == 200 else {
                    failed += 1
                    printError("\(target): \(response.status) \(Text.trimmed(response.text))")
                    continue
                }
                if json {
                    print(response.text, terminator: "")
                    continue
                }
                let listing = try CacheListing.decode(Array(response.text.utf8))
                if targets.count > 1 { print("\(target):") }
                print(Self.table(listing))
            } catch {
                failed += 1
                printError("\(target): \(error)")
            }
        }
        if failed > 0 { throw ExitCode(1) }
    }

    /// The ttl column: seconds of freshness left (negative: stale), or "reval" under the
    /// revalidate policy, where the origin is asked before every use whatever the freshness.
    static func ttl(_ entry: CacheListing.Entry) -> String {
        if entry.policy == CachePolicy.revalidate.rawValue { return "reval" }
        return entry.ttlSeconds.map(String.init) ?? "-"
    }

    static func table(_ listing: CacheListing) -> String {
        var lines = ["      size  tier           age       ttl    hits  key  (vary)  url (when not the key)"]
        for entry in listing.entries {
            let vary =
                entry.vary.isEmpty
                ? "" : "  (" + entry.vary.sorted(by: <).map { Text.printable("\($0.key)=\($0.value)") }.joined(separator: ", ") + ")"
            lines.append(
                Format.bytes(Double(entry.bytes)).leftPadded(10) + "  " + Text.padded(entry.tier, to: 11)
                    + (entry.ageSeconds.map(String.init) ?? "-").leftPadded(7) + Self.ttl(entry).leftPadded(10)
                    + String(entry.hits).leftPadded(8) + "  " + Text.printable(entry.key) + vary
                    + (entry.url.map { $0 == entry.key ? "" : "  \(Text.printable($0))" } ?? ""))
        }
        let more = listing.truncated ? " (more match: raise --limit or narrow the prefix)" : ""
        lines.append("\(listing.entries.count) entr\(listing.entries.count == 1 ? "y" : "ies")\(more)")
        lines += Purge.scopeNotes(keys: listing.keys, shared: listing.shared, notCovered: listing.notCovered)
        return lines.joined(separator: "\n")
    }
}
