import Foundation
import Testing

extension IntegrationTests {
    /// Keys are the routes' business, URLs the user's: `larder ls`, `larder purge`,
    /// `POST /ban` and `GET /cache` find entries a preset stores under its own key
    /// (`debian:/debian/pool/…`) from the URL they were fetched by, and take key prefixes too.
    /// Host names are pinned to a loopback origin with `upstream.resolve`.
    @Suite(.timeLimit(.minutes(3))) struct RouteKeyAdmin {
        static let demo = "/debian/pool/main/d/demo/demo_1.0_all.deb"
        static let hello = "/debian/pool/main/h/hello/hello_2.0_all.deb"
        static let zed = "/debian/pool/main/z/zed/zed_1_all.deb"
        static let release = "/debian/dists/bookworm/InRelease"

        /// An origin serving three pool files that say they are stale at once (max-age=0: a
        /// ten-year ttl comes from the preset alone) and a release file.
        static func archive() throws -> Origin {
            let origin = try Origin()
            for path in [demo, hello, zed] {
                try origin.script(path, [.init(headers: [("Cache-Control", "max-age=0")], body: "package \(path)")], conditional: false)
            }
            try origin.script(release, [.init(headers: [("Cache-Control", "max-age=600")], body: "Suite: bookworm\n")], conditional: false)
            return origin
        }

        static func config(_ origin: Origin) -> String {
            "[cache]\npresets = [\"debian\"]\n[upstream]\nresolve = [\"deb.debian.org:\(origin.port):127.0.0.1\"]\n"
        }

        static func fetch(_ larder: Larder, _ origin: Origin, _ path: String) throws -> Curl.Result {
            try Curl.viaProxy(larder.proxy, ["http://deb.debian.org:\(origin.port)\(path)"])
        }

        static func listing(_ larder: Larder, _ prefix: String) throws -> [String: Any] {
            let answer = try CacheAdmin.admin(larder, "GET", "/cache?prefix=\(prefix)")
            guard answer.status == 200, let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any] else {
                throw TestFailure("GET /cache?prefix=\(prefix): \(answer.status) \(answer.text)")
            }
            return object
        }

        static func entries(_ listing: [String: Any]) -> [[String: Any]] { listing["entries"] as? [[String: Any]] ?? [] }

        /// `ls URL` and `GET /cache?prefix=URL` list the pool files under their `debian:` key,
        /// with the URL each was fetched from and the preset's ten-year freshness (not the
        /// origin's max-age=0); after a restart, read back from disk, they still do. A key
        /// prefix lists them too.
        @Test func listingByURLShowsPresetKeyedEntriesWithTheirURLAndTheRoutesFreshness() throws {
            let origin = try Self.archive()
            let cacheDirectory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cacheDirectory) }
            let base = "http://deb.debian.org:\(origin.port)/debian/"
            do {
                let larder = try Larder(config: Self.config(origin), cacheDirectory: cacheDirectory)
                for path in [Self.demo, Self.hello, Self.release] { #expect(try Self.fetch(larder, origin, path).status == 200) }
                let listing = try Self.listing(larder, base)
                let entries = Self.entries(listing)
                #expect(entries.count == 3, "\(listing)")
                let demo = entries.first { $0["key"] as? String == "debian:\(Self.demo)" }
                #expect(demo?["url"] as? String == "http://deb.debian.org:\(origin.port)\(Self.demo)", "\(entries)")
                #expect((demo?["ttl_seconds"] as? Int ?? 0) > 300_000_000, "the preset's ten years: \(String(describing: demo))")
                #expect(demo?["policy"] as? String == "cache_first")
                let release = entries.first { ($0["key"] as? String)?.hasSuffix(Self.release) == true }
                #expect(release?["policy"] as? String == "revalidate" && (release?["ttl_seconds"] as? Int ?? 0) > 500, "\(entries)")
                #expect((listing["keys"] as? [String])?.contains("debian:/debian/") == true, "\(listing)")

                let admin = ["--admin", "127.0.0.1:\(larder.adminPort)"]
                let ls = try CacheAdmin.larderCLI(["ls"] + admin + [base])
                #expect(ls.status == 0, "\(ls.err)")
                #expect(ls.out.contains("debian:\(Self.demo)  http://deb.debian.org:\(origin.port)\(Self.demo)"), "\(ls.out)")
                #expect(ls.out.contains("3 entries") && !ls.out.contains(" -"), "\(ls.out)")
                // The index is asked for before every use: no ttl to read as stale or fresh.
                let releaseLine = ls.out.split(separator: "\n").first { $0.hasSuffix(Self.release) }
                #expect(releaseLine?.contains("  reval  ") == true, "\(ls.out)")
                let byKey = try CacheAdmin.larderCLI(["ls"] + admin + ["debian:/debian/pool/"])
                #expect(byKey.status == 0 && byKey.out.contains("2 entries") && byKey.out.contains("debian:\(Self.hello)"), "\(byKey)")
                // Let the disk writes land before the restart.
                var onDisk = 0
                for _ in 0..<100 where onDisk < 3 {
                    onDisk = Self.entries(try Self.listing(larder, base)).filter { ($0["tier"] as? String)?.contains("disk") == true }.count
                    if onDisk < 3 { usleep(50_000) }
                }
                #expect(onDisk == 3)
            }
            let larder = try Larder(config: Self.config(origin), cacheDirectory: cacheDirectory)
            var demo: [String: Any]?
            for _ in 0..<100 where demo == nil {
                demo = Self.entries(try Self.listing(larder, base)).first { $0["key"] as? String == "debian:\(Self.demo)" }
                if demo == nil { usleep(50_000) }
            }
            #expect(demo?["tier"] as? String == "disk", "\(String(describing: demo))")
            #expect(demo?["url"] as? String == "http://deb.debian.org:\(origin.port)\(Self.demo)", "read back from the entry's head")
            #expect((demo?["ttl_seconds"] as? Int ?? 0) > 300_000_000)
        }

        /// `purge --prefix URL`, `purge --glob URL-glob`, `POST /ban?prefix=URL`, `purge URL`
        /// and key prefixes reach the preset-keyed entries, and nothing else: another host's
        /// prefix removes none of them, a digest-keyed entry (shared by every host) is reached
        /// only by its whole URL, and a glob of stars alone is refused.
        @Test func purgeAndBanByURLOrKeyReachPresetKeyedEntriesAndNoOthers() throws {
            let origin = try Self.archive()
            let index = "Package: demo\n"
            let byHash = "/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/\(try SharedKeys.digest(index))"
            try origin.script(byHash, [.init(body: index)], conditional: false)
            let larder = try Larder(config: Self.config(origin) + "[admin]\ntoken = \"s3cret\"\n")
            let admin = ["--admin", "127.0.0.1:\(larder.adminPort)", "--token", "s3cret"]
            let host = "http://deb.debian.org:\(origin.port)"
            func fetchAll() throws {
                for path in [Self.demo, Self.hello, Self.zed, byHash] { #expect(try Self.fetch(larder, origin, path).status == 200) }
            }
            func fetchedFromOrigin(_ path: String) throws -> Int { try origin.count(path) }
            try fetchAll()

            let elsewhere = try CacheAdmin.admin(
                larder, "POST", "/ban?prefix=http://ftp.xx.debian.org:\(origin.port)/debian/pool/", token: "s3cret")
            #expect(elsewhere.status == 200 && elsewhere.text.contains("\"banned\":0"), "\(elsewhere.text)")

            let prefix = try CacheAdmin.larderCLI(["purge"] + admin + ["--prefix", "\(host)/debian/pool/main/d/"])
            #expect(prefix.status == 0 && prefix.out.contains("removed 1 URL under"), "\(prefix.out) \(prefix.err)")
            #expect(prefix.out.contains("debian:{path}"), "says the key is shared by the project's hosts: \(prefix.out)")
            let glob = try CacheAdmin.larderCLI(["purge"] + admin + ["--glob", "\(host)/debian/pool/*/hello_*.deb"])
            #expect(glob.status == 0 && glob.out.contains("removed 1 URL matching"), "\(glob.out) \(glob.err)")
            let ban = try CacheAdmin.admin(larder, "POST", "/ban?prefix=\(host)/debian/pool/main/z/", token: "s3cret")
            #expect(ban.text.contains("\"banned\":1") && ban.text.contains("debian:/debian/pool/main/z/"), "\(ban.text)")
            let dists = try CacheAdmin.admin(larder, "POST", "/ban?prefix=\(host)/debian/dists/", token: "s3cret")
            #expect(dists.text.contains("\"banned\":0") && dists.text.contains("sha256:{digest}"), "not covered, and said: \(dists.text)")
            try fetchAll()
            for path in [Self.demo, Self.hello, Self.zed] { #expect(try fetchedFromOrigin(path) == 2, "\(path) was purged") }
            #expect(try fetchedFromOrigin(byHash) == 1, "the digest-keyed entry stays")

            let whole = try CacheAdmin.larderCLI(["purge"] + admin + ["--prefix", host + byHash])
            #expect(whole.out.contains("removed 1 URL"), "its whole URL names it: \(whole.out) \(whole.err)")
            let url = try CacheAdmin.larderCLI(["purge"] + admin + [host + Self.demo])
            #expect(url.status == 0 && url.out.contains("purged"), "\(url.out) \(url.err)")
            let key = try CacheAdmin.larderCLI(["purge"] + admin + ["debian:\(Self.hello)"])
            #expect(key.status == 0 && key.out.contains("purged debian:"), "\(key.out) \(key.err)")
            let keyPrefix = try CacheAdmin.larderCLI(["purge"] + admin + ["--prefix", "debian:/debian/pool/main/z/"])
            #expect(keyPrefix.status == 0 && keyPrefix.out.contains("removed 1 URL"), "\(keyPrefix.out) \(keyPrefix.err)")
            try fetchAll()
            for path in [Self.demo, Self.hello, Self.zed] { #expect(try fetchedFromOrigin(path) == 3, "\(path) was purged") }
            #expect(try fetchedFromOrigin(byHash) == 2)

            let everything = try CacheAdmin.admin(larder, "POST", "/ban?glob=**", token: "s3cret")
            #expect(everything.status == 400, "\(everything.text)")
            let refused = try CacheAdmin.larderCLI(["purge"] + admin + ["--glob", "*"])
            #expect(refused.status == 64 && refused.err.contains("matches every entry"), "\(refused)")
            let notAKey = try CacheAdmin.larderCLI(["purge"] + admin + ["--prefix", "debian pool"])
            #expect(notAKey.status == 64 && notAKey.err.contains("nor a cache key"), "\(notAKey)")
            #expect(try CacheAdmin.admin(larder, "GET", "/cache?prefix=debian:").status == 401, "the token guards the listing")
        }
    }
}
