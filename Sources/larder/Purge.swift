import ArgumentParser
import Foundation
import LarderIO

/// `larder purge URL`: removes a URL from the cache of one daemon, or of every node of a cluster.
struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a URL from the cache (memory and disk).",
        discussion: """
            Sends POST /purge?url=… to the admin listener (with the bearer token when one is configured).
            Examples:
              larder purge http://deb.debian.org/debian/dists/bookworm/Release
              larder purge --cluster 10.0.0.1:3129,10.0.0.2:3129,10.0.0.3:3129 http://example.org/a
            """)

    @OptionGroup var options: AdminOptions

    @Option(name: .customLong("cluster"), help: "Comma-separated admin addresses of every cluster node: purge on all of them.")
    var cluster: String?

    @Argument(help: "The absolute URL to purge.")
    var url: String

    func run() throws {
        guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
            throw ValidationError("'\(url)' is not an absolute http(s) URL")
        }
        let token = try options.bearerToken()
        var targets: [SocketAddress] = []
        if let cluster {
            for item in cluster.split(separator: ",") {
                guard let address = SocketAddress(parsing: String(item).trimmingCharacters(in: .whitespaces)) else {
                    throw ValidationError("--cluster: '\(item)' is not an address like 10.0.0.1:3129")
                }
                targets.append(address)
            }
        } else {
            targets = [try options.adminAddress()]
        }
        let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? url
        var failed = 0
        var found = 0
        for target in targets {
            var headers = [("Host", target.description)]
            if !token.isEmpty { headers.append(("Authorization", "Bearer \(token)")) }
            do {
                let response = try BlockingHTTPClient(address: target, timeoutSeconds: 10).request(
                    "POST", "/purge?url=\(encoded)", headers: headers)
                guard response.status == 200 else {
                    failed += 1
                    printError("\(target): \(response.status) \(response.text.trimmingCharacters(in: .whitespacesAndNewlines))")
                    continue
                }
                let purged = response.text.contains("\"purged\":true")
                if purged { found += 1 }
                print("\(target): \(purged ? "purged" : "not cached") \(url)")
            } catch {
                failed += 1
                printError("\(target): \(error)")
            }
        }
        if targets.count > 1 { print("\(found) of \(targets.count) nodes held \(url)") }
        if failed > 0 { throw ExitCode(1) }
    }
}
