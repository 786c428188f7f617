import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// Listing and banning what the cache holds: the admin calls, `larder ls` and
    /// `larder purge --prefix/--glob`, against the real binary and origin.
    @Suite(.timeLimit(.minutes(3))) struct CacheAdmin {
        /// Fetches `count` URLs `base` + index through the proxy on one keep-alive connection;
        /// returns how many were hits and how many were not.
        static func fetch(_ larder: Larder, base: String, count: Int, query: String = "cc=max-age=600&size=100") throws -> (
            hits: Int, misses: Int
        ) {
            let script = """
                import http.client, json, sys
                connection = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
                seen = {"hits": 0, "misses": 0}
                for i in range(int(sys.argv[3])):
                    connection.request("GET", f"{sys.argv[2]}{i}?{sys.argv[4]}")
                    response = connection.getresponse()
                    response.read()
                    assert response.status == 200, response.status
                    seen["hits" if "; hit" in response.getheader("Cache-Status", "") else "misses"] += 1
                print(json.dumps(seen))
                """
            let child = try ChildProcess("/usr/bin/env", ["python3", "-c", script, "\(larder.proxyPort)", base, "\(count)", query])
            child.waitUntilExit()
            guard child.terminationStatus == 0,
                let seen = try JSONSerialization.jsonObject(with: Data(child.stdout.utf8)) as? [String: Int]
            else { throw TestFailure("fetching \(base)*: \(child.stderr)") }
            return (seen["hits"] ?? -1, seen["misses"] ?? -1)
        }

        static func admin(_ larder: Larder, _ method: String, _ path: String, token: String? = nil) throws -> Curl.Result {
            try Curl.run(
                ["-X", method] + (token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []) + [
                    "http://127.0.0.1:\(larder.adminPort)\(path)"
                ])
        }

        static func larderCLI(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let child = try ChildProcess(Paths.larder, arguments)
            child.waitUntilExit()
            return (child.terminationStatus, child.stdout, child.stderr)
        }

        @Test func listingShowsSizeTierAgeFreshnessAndHitsAndLsPrintsIt() throws {
            let origin = try Origin()
            // Bodies over 64 KiB stay out of memory: one entry is on disk only.
            let larder = try Larder(config: "[memory]\nmax_object_bytes = \"64KiB\"\n")
            let small = origin.url("/list/small?cc=max-age=600&size=1000")
            let big = origin.url("/list/big?cc=max-age=600&size=200000")
            for url in [small, small, small, big] { #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200) }
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/elsewhere?cc=max-age=600")]).status == 200)
            // The disk writes finish on their own time; the listing shows what is stored.
            var entries: [[String: Any]] = []
            for _ in 0..<50 {
                let answer = try Self.admin(larder, "GET", "/cache?prefix=\(origin.url("/list/"))")
                #expect(answer.status == 200)
                let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
                entries = object?["entries"] as? [[String: Any]] ?? []
                if entries.count == 2, entries.allSatisfy({ ($0["tier"] as? String)?.contains("disk") == true }) { break }
                usleep(100_000)
            }
            #expect(entries.map { $0["key"] as? String } == [big, small], "sorted by key, the prefix only")
            #expect(entries.map { $0["tier"] as? String } == ["disk", "memory+disk"])
            #expect(entries.map { $0["hits"] as? Int } == [0, 2], "two lookups found the small one")
            #expect((entries[1]["bytes"] as? Int) == 1000 && (entries[0]["bytes"] as? Int ?? 0) > 200_000)
            for entry in entries {
                let age = entry["age_seconds"] as? Int ?? -1
                let ttl = entry["ttl_seconds"] as? Int ?? -1
                #expect(age >= 0 && age <= 5 && ttl >= 595 && ttl <= 600, "\(entry)")
            }

            let limited =
                try JSONSerialization.jsonObject(
                    with: try Self.admin(larder, "GET", "/cache?prefix=\(origin.url("/"))&limit=1").body) as? [String: Any]
            #expect((limited?["entries"] as? [Any])?.count == 1 && limited?["truncated"] as? Bool == true)
            #expect(try Self.admin(larder, "GET", "/cache?limit=0").status == 400)

            let ls = try Self.larderCLI(["ls", "--admin", "127.0.0.1:\(larder.adminPort)", origin.url("/list/")])
            #expect(ls.status == 0, "\(ls.err)")
            #expect(ls.out.contains("memory+disk") && ls.out.contains(small) && ls.out.contains("2 entries"), "\(ls.out)")
        }

        @Test func aPrefixBanOfAThousandEntriesCountsThemAndTheyMissAfterwardsOnDiskToo() throws {
            let origin = try Origin()
            let cache = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let banned = origin.url("/ban/pkg/")
            let kept = origin.url("/keep/")
            do {
                let larder = try Larder(cacheDirectory: cache)
                #expect(try Self.fetch(larder, base: banned, count: 1000) == (0, 1000))
                #expect(try Self.fetch(larder, base: kept, count: 10) == (0, 10))
                let answer = try Self.admin(larder, "POST", "/ban?prefix=\(banned)")
                let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
                #expect(answer.status == 200 && object?["banned"] as? Int == 1000, "\(answer.text)")
                #expect(try larder.stats().invalidations == 1000)
                #expect(try Self.fetch(larder, base: kept, count: 10) == (10, 0), "the rest is untouched")
                #expect(try Self.fetch(larder, base: banned, count: 5) == (0, 5), "banned: fetched again")
                #expect(larder.stop() == 0)
            }
            // The disk entries went too: a restart does not bring them back.
            let restarted = try Larder(cacheDirectory: cache)
            #expect(try Self.fetch(restarted, base: banned, count: 1000) == (5, 995))
            #expect(try Self.fetch(restarted, base: kept, count: 10) == (10, 0))
        }

        @Test func globBansAndPurgeByPrefixFromTheCommandLineWithTheToken() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[admin]\ntoken = \"s3cret\"\n")
            #expect(try Self.fetch(larder, base: origin.url("/g/a-"), count: 4, query: "cc=max-age=600") == (0, 4))
            #expect(try Self.fetch(larder, base: origin.url("/g/b-"), count: 3, query: "cc=max-age=600") == (0, 3))
            #expect(try Self.admin(larder, "POST", "/ban?glob=\(origin.url("/g/*-1*"))").status == 401, "the token is required")
            #expect(try Self.admin(larder, "GET", "/cache?prefix=").status == 401, "listing too: URLs can carry credentials")

            let glob = try Self.admin(larder, "POST", "/ban?glob=\(origin.url("/g/*-1*"))", token: "s3cret")
            #expect(glob.text.contains("\"banned\":2"), "a-1 and b-1: \(glob.text)")
            #expect(try Self.admin(larder, "POST", "/ban", token: "s3cret").status == 400)

            let admin = ["--admin", "127.0.0.1:\(larder.adminPort)", "--token", "s3cret"]
            let purge = try Self.larderCLI(["purge"] + admin + ["--prefix", origin.url("/g/a-")])
            #expect(purge.status == 0 && purge.out.contains("removed 3 URLs under"), "\(purge.out) \(purge.err)")
            let ls = try Self.larderCLI(["ls"] + admin + [origin.url("/g/")])
            #expect(ls.out.contains("/g/b-0") && ls.out.contains("/g/b-2") && ls.out.contains("2 entries"), "\(ls.out)")
            #expect(!ls.out.contains("/g/a-"))
            let refused = try Self.larderCLI(["purge"] + admin + ["--prefix", "ftp://x"])
            #expect(refused.status != 0 && refused.err.contains("does not start with http://"))
        }

        /// A client's Vary'd header may hold C1 controls (CSI, NEL): `ls` writes them escaped,
        /// never to the operator's terminal as they are.
        @Test func lsEscapesControlCharactersInWhatItPrints() throws {
            let origin = try Origin()
            try origin.script(
                "/tty", [.init(headers: [("Vary", "X-Tag"), ("Cache-Control", "max-age=600")], body: "tty")], conditional: false)
            let larder = try Larder()
            let tag = "a\u{9B}31m\u{85}b"
            #expect(try Curl.viaProxy(larder.proxy, ["-H", "X-Tag: \(tag)", origin.url("/tty")]).status == 200)
            let ls = try Self.larderCLI(["ls", "--admin", "127.0.0.1:\(larder.adminPort)", origin.url("/tty")])
            #expect(ls.status == 0 && ls.out.contains("1 entry"), "\(ls.out) \(ls.err)")
            #expect(!ls.out.unicodeScalars.contains { (0x80...0x9F).contains($0.value) }, "\(ls.out.debugDescription)")
            #expect(ls.out.contains("\\u{9B}31m") && ls.out.contains("\\u{85}b)"), "\(ls.out.debugDescription)")
        }
    }
}
