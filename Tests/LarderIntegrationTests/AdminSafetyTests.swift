import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// A safe admin API by default, against the real binary: the stock configuration with the
    /// systemd credential, DNS rebinding and cross-site calls refused, signed query strings
    /// redacted in listings and access lines, and warnings about settings that let strangers in.
    @Suite(.timeLimit(.minutes(3))) struct AdminSafety {
        static func write(_ text: String, to path: String, mode: mode_t) throws {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            #expect(chmod(path, mode) == 0)
        }

        static func admin(_ larder: Larder, _ method: String, _ path: String, headers: [String] = []) throws -> Curl.Result {
            try Curl.run(["-X", method] + headers.flatMap { ["-H", $0] } + ["http://127.0.0.1:\(larder.adminPort)\(path)"])
        }

        /// The keys a `GET /cache` answer lists.
        static func listedKeys(_ larder: Larder, prefix: String) throws -> [String] {
            let answer = try admin(larder, "GET", "/cache?prefix=\(encoded(prefix))")
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            return (object?["entries"] as? [[String: Any]])?.compactMap { $0["key"] as? String } ?? []
        }

        static func encoded(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
        }

        static func larderCLI(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
            let child = try ChildProcess(Paths.larder, arguments, environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 })
            child.waitUntilExit()
            return child
        }

        /// Whether this machine lets an unprivileged process have a network namespace of its own,
        /// where a wildcard listener is reachable from nowhere.
        static let canUnshare: Bool = {
            guard let child = try? ChildProcess("/usr/bin/unshare", ["-rn", "/bin/true"]) else { return false }
            child.waitUntilExit()
            return child.terminationStatus == 0
        }()

        @Test func stockConfigWithTheCredentialRefusesAdminCallsWithoutTheToken() throws {
            let credentials = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: credentials) }
            try Self.write("stock-secret\n", to: credentials + "/admin-token", mode: 0o400)
            let stock = try String(contentsOfFile: Paths.root + "/config/larder.toml", encoding: .utf8)
            #expect(stock.contains("token = \"\"") && stock.contains("token_file = \"\""), "the shipped file leaves both empty")
            let larder = try Larder(config: stock, environment: ["CREDENTIALS_DIRECTORY": credentials])
            let bearer = "Authorization: Bearer stock-secret"
            for (method, path) in [("POST", "/purge?url=http%3A%2F%2Fexample.org%2F"), ("DELETE", "/cache"), ("GET", "/cache")] {
                #expect(try Self.admin(larder, method, path).status == 401, "\(method) \(path) without the token")
                #expect(try Self.admin(larder, method, path, headers: ["Authorization: Bearer wrong"]).status == 401)
                #expect(try Self.admin(larder, method, path, headers: [bearer]).status == 200, "\(method) \(path) with it")
            }
            // The command line reads the same credential with the same file.
            let address = "127.0.0.1:\(larder.adminPort)"
            let environment = ["CREDENTIALS_DIRECTORY": credentials]
            let list = try Self.larderCLI(["ls", "--config", larder.configPath, "--admin", address], environment: environment)
            #expect(list.terminationStatus == 0, "\(list.stderr)")
            let purge = try Self.larderCLI(
                ["purge", "http://example.org/x", "--config", larder.configPath, "--admin", address], environment: environment)
            #expect(purge.terminationStatus == 0, "\(purge.stderr)")
            let without = try Self.larderCLI(["ls", "--config", larder.configPath, "--admin", address])
            #expect(without.terminationStatus != 0, "without the credential the listing is refused")
            // Loopback listeners and a token: nothing dangerous to warn about.
            #expect(
                !larder.child.stderr.contains("open proxy") && !larder.child.stderr.contains("has no admin.token"), "\(larder.child.stderr)"
            )
        }

        @Test func rebindingHostIsRefusedOnCacheListingAndStats() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/rebind/secret-path?cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            for path in ["/cache", "/stats", "/", "/healthz"] {
                let rebound = try Self.admin(larder, "GET", path, headers: ["Host: evil.example:\(larder.adminPort)"])
                #expect(rebound.status == 421, "\(path): \(rebound.text)")
                #expect(!rebound.text.contains("secret-path") && !rebound.text.contains("{"), "\(path): \(rebound.text)")
            }
            try larder.child.waitForOutput { $0.contains("admin request refused") && $0.contains("evil.example") }
            // RFC 9110 §15.5.20 names the status; "421 Unknown" reads as a server bug.
            let raw = try RawConnection(port: larder.adminPort)
            raw.send("GET /stats HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
            #expect(raw.readLine() == "HTTP/1.1 421 Misdirected Request\r")
            // The listener's own names, as curl, Prometheus and a kubelet send them, still work.
            for host in ["127.0.0.1:\(larder.adminPort)", "localhost:\(larder.adminPort)"] {
                let listing = try Self.admin(larder, "GET", "/cache", headers: ["Host: \(host)"])
                #expect(listing.status == 200 && listing.text.contains("secret-path"), "\(host): \(listing.text)")
            }
            for host in ["127.0.0.1:\(larder.adminPort)", "localhost:\(larder.adminPort)"] {
                #expect(try Self.admin(larder, "GET", "/stats", headers: ["Host: \(host)"]).status == 200)
            }
            #expect(try Self.admin(larder, "GET", "/metrics").status == 200)
            #expect(try Self.admin(larder, "GET", "/healthz").text == "ok\n")
        }

        @Test func crossSitePostBanIsRefusedAndBansNothing() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/xsite/entry?cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            #expect(try Self.listedKeys(larder, prefix: origin.url("/xsite/")) == [url])
            let ban = "/ban?prefix=\(Self.encoded(origin.url("/xsite/")))"
            // What a page on another site can send: a simple form POST, with the browser's headers.
            let attacks = [
                ["Origin: http://evil.example", "Content-Type: application/x-www-form-urlencoded"],
                ["Origin: null"],
                ["Sec-Fetch-Site: cross-site"],
                ["Origin: http://evil.example", "Sec-Fetch-Site: cross-site"],
            ]
            for headers in attacks {
                let refused = try Self.admin(larder, "POST", ban, headers: headers)
                #expect(refused.status == 403, "\(headers): \(refused.text)")
            }
            #expect(
                try Self.admin(larder, "DELETE", "/cache", headers: ["Origin: http://evil.example"]).status == 403,
                "DELETE /cache from another site")
            try larder.child.waitForOutput { $0.contains("admin request refused") && $0.contains("Origin: http://evil.example") }
            #expect(try Self.listedKeys(larder, prefix: origin.url("/xsite/")) == [url], "nothing was banned or cleared")
            // The dashboard's own origin (and a command-line client, which sends none) may.
            let own = ["Origin: http://127.0.0.1:\(larder.adminPort)", "Sec-Fetch-Site: same-origin"]
            #expect(try Self.admin(larder, "POST", ban, headers: own).status == 200)
            #expect(try Self.listedKeys(larder, prefix: origin.url("/xsite/")).isEmpty, "the same-origin ban worked")
        }

        @Test func listingRedactsSignedQueryValues() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/signed/file?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=deadbeef&sig=s3cr3t&cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            let listing = try Self.admin(larder, "GET", "/cache?prefix=\(Self.encoded(origin.url("/signed/")))")
            #expect(listing.status == 200)
            #expect(listing.text.contains("X-Amz-Signature=REDACTED") && listing.text.contains("sig=REDACTED"), "\(listing.text)")
            #expect(listing.text.contains("cc=max-age=600"), "other parameters stay")
            let ls = try Self.larderCLI(["ls", "--admin", "127.0.0.1:\(larder.adminPort)", origin.url("/signed/")])
            #expect(ls.terminationStatus == 0 && ls.stdout.contains("X-Amz-Credential=REDACTED"), "\(ls.stdout)\(ls.stderr)")
            for secret in ["AKIAEXAMPLE", "deadbeef", "s3cr3t"] {
                #expect(!listing.text.contains(secret) && !ls.stdout.contains(secret), "\(secret) leaked")
            }
        }

        @Test func listingHidesEncodedSignatureNamesSemicolonParametersAndVaryCredentials() throws {
            let origin = try Origin()
            let larder = try Larder()
            // The origin decodes `X%2DAmz%2DSignature`; some servers split parameters at `;`.
            let signed = origin.url("/hidden/file?X%2DAmz%2DSignature=enc111&page=2;sig=semi222&cc=max-age=600")
            #expect(try Curl.viaProxy(larder.proxy, [signed]).status == 200)
            // A public answer that varies on the cookie and the bearer token keeps both with it.
            let varied = origin.url("/hidden/varied?cc=public,max-age=600&h=Vary:Cookie,Authorization,X-Auth-Token,X-Api-Key")
            let credentials = [
                "Cookie: session=cookie333", "Authorization: Bearer bearer444", "X-Auth-Token: auth555", "X-Api-Key: key000",
            ]
            #expect(try Curl.viaProxy(larder.proxy, credentials.flatMap { ["-H", $0] } + [varied]).status == 200)
            let listing = try Self.admin(larder, "GET", "/cache?prefix=\(Self.encoded(origin.url("/hidden/")))")
            #expect(listing.status == 200 && listing.text.contains("X%2DAmz%2DSignature=REDACTED"), "\(listing.text)")
            #expect(listing.text.contains(";sig=REDACTED") && listing.text.contains("REDACTED"), "\(listing.text)")
            let ls = try Self.larderCLI(["ls", "--admin", "127.0.0.1:\(larder.adminPort)", origin.url("/hidden/")])
            #expect(ls.terminationStatus == 0 && ls.stdout.contains("/hidden/varied"), "\(ls.stdout)\(ls.stderr)")
            for secret in ["enc111", "semi222", "cookie333", "bearer444", "auth555", "key000"] {
                #expect(!listing.text.contains(secret) && !ls.stdout.contains(secret), "\(secret) leaked: \(listing.text) \(ls.stdout)")
            }
        }

        @Test func listingPrefixIsNoOracleForARedactedSignature() throws {
            let origin = try Origin()
            let larder = try Larder()
            let url = origin.url("/oracle/file?cc=max-age=600&X-Amz-Signature=c0ffee")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            let base = origin.url("/oracle/file?cc=max-age=600&X-Amz-Signature=")
            // Guessing the first character: a right and a wrong guess must look the same.
            let right = try Self.listedKeys(larder, prefix: base + "c")
            let wrong = try Self.listedKeys(larder, prefix: base + "d")
            #expect(right == wrong, "right: \(right), wrong: \(wrong)")
            #expect(right == [base + "REDACTED"], "the entry is still listed by its visible part")
        }

        @Test func daemonLogLinesAndAdminAccessLinesRedactQuerySecrets() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/access.log"
            let larder = try Larder(
                config: "[log]\naccess_file = \"\(file)\"\nadmin_requests = true\n[retry]\nstrategy = \"none\"\n")
            // An origin that refuses the connection: the daemon logs "upstream failed" with the URL.
            let closed = try IntegrationTests.ProxyPath.unusedPort()
            let failing = "http://127.0.0.1:\(closed)/gone?token=fail666&X-Amz-Signature=fail777&v=1"
            #expect(try Curl.viaProxy(larder.proxy, [failing]).status == 502)
            // An operator purges and bans a signed URL: the daemon's notice and the access line.
            let purged = "http://127.0.0.1:\(closed)/purged?sig=purge888&v=2"
            #expect(try Self.admin(larder, "POST", "/purge?url=\(Self.encoded(purged))").status == 200)
            #expect(try Self.admin(larder, "POST", "/ban?prefix=\(Self.encoded(purged))").status == 200)
            try larder.child.waitForOutput { $0.contains("upstream failed") && $0.contains("purged") && $0.contains("banned") }
            var log = ""
            _ = waitUntil(seconds: 5) {
                log = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
                return log.contains("/purge") && log.contains("/ban")
            }
            let daemon = larder.child.stderr
            #expect(daemon.contains("token=REDACTED") && daemon.contains("sig=REDACTED"), "\(daemon)")
            #expect(log.contains("REDACTED") && log.contains("/purge?url="), "\(log)")
            for secret in ["fail666", "fail777", "purge888"] {
                #expect(!daemon.contains(secret), "\(secret) in the daemon's log: \(daemon)")
                #expect(!log.contains(secret), "\(secret) in the access log: \(log)")
            }
        }

        @Test func deeplyNestedQueryIsLoggedWithoutStallingOrCrashing() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/access.log"
            let origin = try Origin()
            let larder = try Larder(config: "[log]\naccess_file = \"\(file)\"\n")
            // Every `?` inside a value looks like a URL with a query of its own.
            let url = origin.url("/nested/x?a=" + String(repeating: "?b=", count: 12_000) + "&token=deep999")
            let started = Date()
            for _ in 0..<3 { #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200) }
            #expect(Date().timeIntervalSince(started) < 5, "three requests took \(Date().timeIntervalSince(started)) s")
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/nested/after")]).status == 200, "the daemon is still up")
            var log = ""
            _ = waitUntil(seconds: 5) {
                log = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
                return log.contains("/nested/after")
            }
            #expect(log.contains("token=REDACTED") && !log.contains("deep999"))
        }

        @Test(arguments: ["larder", "squid", "combined", "json"])
        func accessLogRedactsSignedQueryValues(format: String) throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/access.log"
            let origin = try Origin()
            let larder = try Larder(config: "[log]\naccess_file = \"\(file)\"\naccess_format = \"\(format)\"\n")
            let url = origin.url("/logged/file?Token=tok123&X-Amz-Signature=sig456&page=7&cc=max-age=60")
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200, "a hit is logged the same way")
            var lines: [String] = []
            _ = waitUntil(seconds: 5) {
                lines = ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                return lines.filter { $0.contains("/logged/file") }.count >= 2
            }
            let logged = lines.filter { $0.contains("/logged/file") }
            #expect(logged.count == 2, "\(lines)")
            for line in logged {
                #expect(line.contains("Token=REDACTED") && line.contains("X-Amz-Signature=REDACTED"), "\(line)")
                #expect(line.contains("page=7"), "\(line)")
                #expect(!line.contains("tok123") && !line.contains("sig456"), "\(line)")
            }
        }

        @Test func checkConfigWarnsAboutAnOpenProxyAndATokenlessExposedAdmin() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let dangerous = directory + "/open.toml"
            try Self.write(
                "[proxy]\nlisten = [\"0.0.0.0:3128\"]\nallow = [\"0.0.0.0/0\", \"::/0\"]\n[admin]\nlisten = \"0.0.0.0:3129\"\n",
                to: dangerous, mode: 0o600)
            let checked = try Self.larderCLI(["check-config", dangerous])
            #expect(checked.terminationStatus == 0, "warnings keep the exit status 0: \(checked.stderr)")
            #expect(checked.stderr.contains("warning: open proxy") && checked.stderr.contains("0.0.0.0:3128"), "\(checked.stderr)")
            #expect(checked.stderr.contains("warning: admin listener 0.0.0.0:3129"), "\(checked.stderr)")

            // The same open proxy with every address spelled as two halves.
            let halves = directory + "/halves.toml"
            try Self.write("[proxy]\nlisten = [\"0.0.0.0:3128\"]\nallow = [\"0.0.0.0/1\", \"128.0.0.0/1\"]\n", to: halves, mode: 0o600)
            let split = try Self.larderCLI(["check-config", halves])
            #expect(split.terminationStatus == 0 && split.stderr.contains("warning: open proxy"), "\(split.stderr)")

            // Users for the proxy and a token for the admin listener: nothing to say.
            let hash = "$6$salt$" + String(repeating: "a", count: 86)
            let guarded = directory + "/guarded.toml"
            try Self.write(
                "[proxy]\nlisten = [\"0.0.0.0:3128\"]\nallow = [\"0.0.0.0/0\"]\nauth_users = [\"alice:\(hash)\"]\n"
                    + "[admin]\nlisten = \"0.0.0.0:3129\"\ntoken = \"t\"\n",
                to: guarded, mode: 0o600)
            let quiet = try Self.larderCLI(["check-config", guarded])
            #expect(quiet.terminationStatus == 0 && !quiet.stderr.contains("warning"), "\(quiet.stdout)\(quiet.stderr)")
        }

        /// Wildcard listeners in a network namespace of their own (reachable from nowhere).
        @Test(.enabled(if: AdminSafety.canUnshare)) func serveWarnsAtStartAndAfterReload() throws {
            let larder = try Larder(
                config: "[proxy]\nallow = [\"0.0.0.0/0\"]\n", listen: ["0.0.0.0:0"], launcher: ["/usr/bin/unshare", "-rn"],
                adminListen: "0.0.0.0:0")
            func count(_ text: String, _ fragment: String) -> Int { text.components(separatedBy: fragment).count - 1 }
            try larder.child.waitForOutput { count($0, "open proxy") == 1 && count($0, "has no admin.token") == 1 }
            larder.child.signal(SIGHUP)
            try larder.child.waitForOutput {
                $0.contains("reloaded") && count($0, "open proxy") == 2 && count($0, "has no admin.token") == 2
            }
        }
    }
}
