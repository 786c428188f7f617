import ArgumentParser
import FoundationEssentials
import LarderServer

/// `larder tls [list]` and `larder tls clear HOST [--client ADDRESS]`: the clients tunnelled
/// blind to intercepted hosts after refusing Larder's certificate, and ending those splices.
struct TLS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "List or clear HTTPS interception's splices (clients tunnelled blind).",
        discussion: """
            A client that refuses Larder's certificate for a host
            tls.splice_after_failures times in a row is tunnelled blind to that host
            for tls.splice_for; other clients stay intercepted. Reads GET /tls; clear
            sends DELETE /tls/splices (with the bearer token when one is configured).
            Examples:
              larder tls
              larder tls clear pypi.org
              larder tls clear pypi.org --client 10.0.0.7
            """,
        subcommands: [List.self, Clear.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show spliced clients, and hosts whose clients fail handshakes.",
            usage: "larder tls list [<options>]")

        @OptionGroup var options: AdminOptions

        @Flag(help: "Print the raw JSON document.")
        var json = false

        func run() throws {
            let body = try options.get("/tls").body
            if json {
                print(String(decoding: body, as: UTF8.self), terminator: "")
                return
            }
            let listing: SpliceListing
            do {
                listing = try SpliceListing.decode(body)
            } catch {
                throw ValidationError("GET /tls did not return a listing this larder reads (\(error)); --json prints it as sent")
            }
            print(Self.text(listing))
        }

        static func text(_ listing: SpliceListing) -> String {
            var lines = [
                "Splices (a client tunnelled blind after \(listing.spliceAfterFailures) refusals in a row, for \(listing.spliceForSeconds)s):"
            ]
            if listing.splices.isEmpty { lines.append("  none") }
            for splice in listing.splices {
                lines.append(
                    "  \(splice.host)  client \(splice.client)  \(splice.secondsLeft)s left  \(splice.failures) refusals: \(splice.reason)")
            }
            if !listing.failingHosts.isEmpty {
                lines.append("Hosts whose clients failed handshakes:")
                for host in listing.failingHosts {
                    let spliced =
                        host.splicedClients > 0 ? "  spliced for \(host.splicedClients) client\(host.splicedClients == 1 ? "" : "s")" : ""
                    lines.append(
                        "  \(host.host)  \(host.failures) failed (\(host.refusals) refused the certificate), last \(host.secondsAgo)s ago\(spliced): \(host.lastFailure)"
                    )
                }
            }
            return lines.joined(separator: "\n")
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End a host's splices (all, or one client's): intercept them again.",
            usage: "larder tls clear [<options>] <host>")

        @OptionGroup var options: AdminOptions

        @Option(name: .customLong("client"), help: "End only this client address's splice.")
        var client: String?

        @Argument(help: "The host, as in tls.intercept (pypi.org).")
        var host: String

        func run() throws {
            let address = try options.adminAddress()
            let token = try options.bearerToken()
            var path = "/tls/splices?host=\(Purge.encode(host))"
            if let client { path += "&client=\(Purge.encode(client))" }
            var headers = [("Host", address.description)]
            if !token.isEmpty { headers.append(("Authorization", "Bearer \(token)")) }
            let response = try BlockingHTTPClient(address: address, timeoutSeconds: 10, deadlineSeconds: 30).request(
                "DELETE", path, headers: headers)
            guard response.status == 200 else {
                printError("\(address): \(response.status) \(Text.trimmed(response.text))")
                throw ExitCode(1)
            }
            let cleared = (try? JSONDecoder().decode(Cleared.self, from: Data(response.text.utf8)))?.cleared ?? 0
            print("\(address): ended \(cleared) splice\(cleared == 1 ? "" : "s") of \(host)\(client.map { " for \($0)" } ?? "")")
        }
    }
}

/// What `DELETE /tls/splices` answers.
private struct Cleared: Decodable {
    let cleared: Int
}
