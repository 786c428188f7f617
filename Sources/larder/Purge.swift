import ArgumentParser
import FoundationEssentials
import LarderIO

/// `larder purge URL | --prefix P | --glob G`: removes one URL, or every stored URL under a
/// prefix or matching a glob (a ban), from one daemon or every node of a cluster.
struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a URL, a prefix or a glob's matches from memory and disk.",
        usage: "larder purge [<options>] [<url>]",
        discussion: """
            A URL is sent as POST /purge?url=…, a cache key as POST /purge?key=…;
            --prefix and --glob as POST /ban?prefix=… or ?glob=… (`*` stands for any
            run of characters), which removes every match before it answers. A URL
            prefix or glob also reaches what routes store under keys of their own
            (debian:/…); a key prefix (debian:, sha256:) is taken as it is. The
            bearer token is sent when one is configured.
            Examples:
              larder purge http://deb.debian.org/debian/dists/bookworm/Release
              larder purge --prefix https://files.pythonhosted.org/packages/
              larder purge --glob 'https://registry.example.org/*/-/*.tgz'
              larder purge --prefix debian:/debian/pool/main/h/hello/
              larder purge --cluster 10.0.0.1:3129,10.0.0.2:3129,10.0.0.3:3129 \\
                http://example.org/a
            """)

    @OptionGroup var options: AdminOptions

    @Option(name: .customLong("cluster"), help: "Comma-separated admin addresses of every cluster node: purge on all of them.")
    var cluster: String?

    @Option(
        name: .customLong("prefix"),
        help: "Remove every stored URL that starts with this URL prefix, or every key with this key prefix (debian:/…).")
    var prefix: String?

    @Option(name: .customLong("glob"), help: "Remove every stored URL (or key) this glob matches (* for any run of characters).")
    var glob: String?

    @Argument(help: "The absolute URL, or the cache key, to purge.")
    var url: String?

    func validate() throws {
        guard [url, prefix, glob].compactMap({ $0 }).count == 1 else {
            throw ValidationError("give one of: a URL, --prefix PREFIX, --glob GLOB")
        }
        if let glob, !glob.contains(where: { $0 != "*" }) {
            throw ValidationError("a glob of stars alone matches every entry; DELETE /cache on the admin listener clears the cache")
        }
        for text in [url, prefix, glob].compactMap({ $0 }) { try Self.checkTarget(text) }
    }

    /// Whether `text` names URLs (`http://`, `https://`) rather than cache keys; throws unless
    /// it is one of the two. A key (or key prefix) is what a route's `key` builds: a name of
    /// letters, digits, `.`, `_`, `+` or `-`, a colon, then printable ASCII without spaces
    /// (`debian:/debian/pool/`, `sha256:0a1b`).
    @discardableResult
    static func checkTarget(_ text: String) throws -> Bool {
        let lowered = text.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") { return true }
        if text.contains("://") { throw ValidationError("'\(text)' does not start with http:// or https://") }
        guard let colon = text.firstIndex(of: ":"), colon > text.startIndex,
            text[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._+-".contains($0)) }),
            text.unicodeScalars.allSatisfy({ (0x21...0x7e).contains($0.value) })
        else {
            throw ValidationError(
                "'\(text)' is neither an http:// or https:// URL nor a cache key such as debian:/debian/pool/ or sha256:… "
                    + "(a name, a colon, then printable ASCII without spaces; larder ls shows keys)")
        }
        return false
    }

    func run() throws {
        let token = try options.bearerToken()
        let targets = try options.targets(cluster: cluster)
        let (path, what): (String, String)
        if let url {
            let parameter = (try? Self.checkTarget(url)) == false ? "key" : "url"
            (path, what) = ("/purge?\(parameter)=\(Self.encode(url))", url)
        } else if let prefix {
            (path, what) = ("/ban?prefix=\(Self.encode(prefix))", "under \(prefix)")
        } else {
            (path, what) = ("/ban?glob=\(Self.encode(glob ?? ""))", "matching \(glob ?? "")")
        }
        var failed = 0
        var found = 0
        var notesPrinted = false
        for target in targets {
            var headers = [("Host", target.description)]
            if !token.isEmpty { headers.append(("Authorization", "Bearer \(token)")) }
            do {
                let response = try BlockingHTTPClient(address: target, timeoutSeconds: 120, deadlineSeconds: 600).request(
                    "POST", path, headers: headers)
                guard response.status == 200 else {
                    failed += 1
                    printError("\(target): \(response.status) \(Text.trimmed(response.text))")
                    continue
                }
                if url != nil {
                    let purged = response.text.contains("\"purged\":true")
                    if purged { found += 1 }
                    print("\(target): \(purged ? "purged" : "not cached") \(what)")
                } else {
                    let answer = try? JSONDecoder().decode(BanAnswer.self, from: Data(response.text.utf8))
                    guard let count = answer?.banned else {
                        failed += 1
                        printError("\(target): an answer without a count: \(response.text)")
                        continue
                    }
                    found += count
                    let partial = answer?.indexComplete == false ? " (its disk index was still being rebuilt)" : ""
                    print("\(target): removed \(count) URL\(count == 1 ? "" : "s") \(what)\(partial)")
                    // The same routes on every node: said once.
                    if !notesPrinted {
                        notesPrinted = true
                        for line in Self.scopeNotes(keys: answer?.keys, shared: answer?.shared, notCovered: answer?.notCovered) {
                            print("  \(line)")
                        }
                    }
                }
            } catch {
                failed += 1
                printError("\(target): \(error)")
            }
        }
        if targets.count > 1 {
            print(url != nil ? "\(found) of \(targets.count) nodes held \(what)" : "\(found) URLs removed on \(targets.count) nodes")
        }
        if failed > 0 { throw ExitCode(1) }
    }

    /// What a URL prefix or glob reached through the routes, for `ls` and `purge` to print:
    /// the key patterns beyond the text itself, the keys several hosts share, the keys a URL
    /// prefix cannot name.
    static func scopeNotes(keys: [String]?, shared: [String]?, notCovered: [String]?) -> [String] {
        var lines: [String] = []
        if let keys, keys.count > 1 { lines.append("through route keys: " + keys.dropFirst().joined(separator: ", ")) }
        if let shared, !shared.isEmpty {
            lines.append("shared by several hosts (one entry serves each): " + shared.joined(separator: ", "))
        }
        if let notCovered, !notCovered.isEmpty {
            lines.append("not reached by a URL prefix: " + notCovered.joined(separator: ", ") + " (give the whole URL, or the key)")
        }
        return lines
    }

    /// `text` as a query parameter value: every byte but RFC 3986's unreserved characters
    /// percent-encoded (§2.1, §2.3).
    static func encode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// What `POST /ban` answers (docs: README, "Listing, purging and warming").
private struct BanAnswer: Decodable {
    let banned: Int
    let indexComplete: Bool?
    let keys: [String]?
    let shared: [String]?
    let notCovered: [String]?

    enum CodingKeys: String, CodingKey {
        case banned, keys, shared
        case indexComplete = "index_complete"
        case notCovered = "not_covered"
    }
}
