import Foundation
import Testing

extension IntegrationTests {
    /// Keys shared by several hosts (docs/CACHING.md, "Route keys"): an entry is planted only
    /// by a host it belongs to, or is checked against the digest its URL names. Host names are
    /// pinned to loopback origins with `upstream.resolve`, never through the system resolver.
    @Suite(.timeLimit(.minutes(3))) struct SharedKeys {
        static let poolPath = "/debian/pool/main/d/demo/demo_1.0_all.deb"

        /// `upstream.resolve` entries pinning each name to 127.0.0.1 on its origin's port.
        static func resolve(_ pins: [(String, Origin)]) -> String {
            "[upstream]\nresolve = [" + pins.map { "\"\($0.0):\($0.1.port):127.0.0.1\"" }.joined(separator: ", ") + "]\n"
        }

        /// The lower-case hex digest of `text` (SHA-256 or SHA-512), from Python's hashlib.
        static func digest(_ text: String, _ algorithm: String = "sha256") throws -> String {
            let child = try ChildProcess(
                "/usr/bin/env",
                [
                    "python3", "-c", "import hashlib, sys; print(hashlib.new(sys.argv[1], sys.argv[2].encode()).hexdigest())", algorithm,
                    text,
                ])
            child.waitUntilExit()
            let hex = child.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            guard hex.count == (algorithm == "sha256" ? 64 : 128) else { throw TestFailure("no digest: \(child.stderr)") }
            return hex
        }

        static func metric(_ larder: Larder, _ name: String) throws -> Int? {
            let text = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") }
        }

        /// A country mirror under debian.org is run by a third party: what a client fetches
        /// through it first must never answer the clients of the official host. The project's
        /// own hosts still share their pool files.
        @Test func plantingThroughACountryMirrorNeverReachesClientsOfTheOfficialHost() throws {
            let official = try Origin()
            let mirror = try Origin()
            try official.script(Self.poolPath, [.init(body: "official package")], conditional: false)
            try mirror.script(Self.poolPath, [.init(body: "planted package")], conditional: false)
            let larder = try Larder(
                config: "[cache]\npresets = [\"debian\"]\n"
                    + Self.resolve([("deb.debian.org", official), ("ftp.debian.org", official), ("ftp.xx.debian.org", mirror)]))
            let planted = try Curl.viaProxy(larder.proxy, ["http://ftp.xx.debian.org:\(mirror.port)\(Self.poolPath)"])
            #expect(planted.status == 200 && planted.text == "planted package", "the mirror answers its own clients")
            let victim = try Curl.viaProxy(larder.proxy, ["http://deb.debian.org:\(official.port)\(Self.poolPath)"])
            #expect(victim.status == 200 && victim.text == "official package", "planted: \(victim.text) \(victim.headers)")
            #expect(try official.count(Self.poolPath) == 1)
            let sibling = try Curl.viaProxy(larder.proxy, ["http://ftp.debian.org:\(official.port)\(Self.poolPath)"])
            #expect(sibling.text == "official package" && sibling.header("cache-status")?.hasPrefix("larder; hit") == true)
            #expect(try official.count(Self.poolPath) == 1, "the official hosts share one entry")
        }

        /// RFC 9111 §4.4 invalidation runs on the request's own entries: a POST to a planting
        /// host, or to the official one, never removes the official host's immutable entry.
        @Test func aPostToAnotherHostLeavesTheOfficialEntry() throws {
            let official = try Origin()
            let mirror = try Origin()
            let index = "Package: demo\n"
            let byHash = "/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/\(try Self.digest(index))"
            for path in [Self.poolPath, byHash] {
                try official.script(path, [.init(body: path == byHash ? index : "official package")], conditional: false)
                try mirror.script(path, [.init(body: "whatever")], conditional: false)
            }
            let larder = try Larder(
                config: "[cache]\npresets = [\"debian\"]\n"
                    + Self.resolve([("deb.debian.org", official), ("ftp.xx.debian.org", mirror)]))
            for path in [Self.poolPath, byHash] {
                let officialURL = "http://deb.debian.org:\(official.port)\(path)"
                let first = try Curl.viaProxy(larder.proxy, [officialURL])
                #expect(first.status == 200)
                let post = try Curl.viaProxy(larder.proxy, ["--data-binary", "x", "http://ftp.xx.debian.org:\(mirror.port)\(path)"])
                #expect(post.status == 200)
                _ = try Curl.viaProxy(larder.proxy, ["--data-binary", "x", officialURL])
                let after = try Curl.viaProxy(larder.proxy, [officialURL])
                #expect(after.body == first.body && after.header("cache-status")?.hasPrefix("larder; hit") == true, "\(after.headers)")
                #expect(
                    try official.requests().filter { $0.method == "GET" && $0.target == path }.count == 1, "\(path) was invalidated")
            }
        }

        /// Content addressing: an OCI layer is one entry per digest, whichever repository or
        /// registry names it.
        @Test func ociLayerIsFetchedOnceFromTwoRepositoriesAndTwoRegistries() throws {
            let layer = String(repeating: "layer bytes 0123456789 ", count: 400)
            let hex = try Self.digest(layer)
            let registryA = try Origin()
            let registryB = try Origin()
            let paths = ["/v2/team/app/blobs/sha256:\(hex)", "/v2/other/tool/blobs/sha256:\(hex)"]
            for path in paths { try registryA.script(path, [.init(body: layer)], conditional: false) }
            try registryB.script("/v2/library/base/blobs/sha256:\(hex)", [.init(body: layer)], conditional: false)
            let larder = try Larder(
                config: "[cache]\npresets = [\"oci\"]\n" + Self.resolve([("reg-a.test", registryA), ("reg-b.test", registryB)]))
            let urls =
                paths.map { "http://reg-a.test:\(registryA.port)\($0)" } + [
                    "http://reg-b.test:\(registryB.port)/v2/library/base/blobs/sha256:\(hex)"
                ]
            for (index, url) in urls.enumerated() {
                let result = try Curl.viaProxy(larder.proxy, [url])
                #expect(result.status == 200 && result.text == layer, "\(url)")
                #expect((result.header("cache-status")?.hasPrefix("larder; hit") == true) == (index > 0), "\(url): \(result.headers)")
            }
            #expect(try registryA.total() + registryB.total() == 1, "fetched once in all")
        }

        /// A body that does not hash to its URL's digest: 502 when nothing was sent yet, a
        /// transfer cut short of its framing when the head was out (a body too large to hold),
        /// counted, logged, never stored: the next request goes upstream again.
        @Test func aBodyThatDoesNotMatchItsDigestIsRefusedCountedAndNeverStored() throws {
            let origin = try Origin()
            let small = "/v2/lib/a/blobs/sha256:\(try Self.digest("the real layer"))"
            let large = "/v2/lib/b/blobs/sha256:\(try Self.digest("the real large layer"))"
            let forgedLarge = String(repeating: "forged ", count: 20_000)
            try origin.script(small, [.init(body: "a forged layer")], conditional: false)
            try origin.script(large, [.init(body: forgedLarge)], conditional: false)
            let larder = try Larder(
                config: "[cache]\npresets = [\"oci\"]\n[memory]\nmax_object_bytes = \"16KiB\"\n" + Self.resolve([("reg.test", origin)]))
            for attempt in 1...2 {
                let refused = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(origin.port)\(small)"])
                #expect(refused.status == 502 && !refused.text.contains("forged"), "attempt \(attempt): \(refused.status) \(refused.text)")
                #expect(try origin.count(small) == attempt, "nothing stored: the next request goes upstream")
            }
            for attempt in 1...2 {
                let cut = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(origin.port)\(large)"])
                #expect(cut.exitCode == 18, "curl: transfer closed with outstanding data, got \(cut.exitCode) \(cut.stderr)")
                #expect(cut.body.count < forgedLarge.utf8.count, "never the complete wrong body")
                #expect(try origin.count(large) == attempt)
            }
            #expect(try Self.metric(larder, "larder_digest_mismatches_total") == 4)
            let log = larder.child.stderr
            let forgedDigest = try Self.digest("a forged layer")
            #expect(log.contains("digest") && log.contains(forgedDigest), "both digests logged: \(log)")
        }

        /// A digest key is shared by every host, but a fill is one host's answer: a client of
        /// another host never waits on it, so a host that forges the body slowly (or past what
        /// is held whole, where its coalesced clients would be cut short) fails its own client
        /// only.
        @Test func aSlowForgerNeverHoldsNorFailsTheClientsOfAnotherHost() throws {
            let official = try Origin()
            let forger = try Origin()
            let layer = String(repeating: "the real layer ", count: 4_000)
            let path = "/v2/lib/a/blobs/sha256:\(try Self.digest(layer))"
            try official.script(path, [.init(body: layer)], conditional: false)
            try forger.script(path, [.init(body: String(repeating: "forged layer ", count: 5_000), delay: 4)], conditional: false)
            // Held whole up to 16 KiB: the forged body would reach a coalesced client's head.
            let larder = try Larder(
                config: "[cache]\npresets = [\"oci\"]\n[memory]\nmax_object_bytes = \"16KiB\"\n"
                    + Self.resolve([("reg.test", official), ("forger.test", forger)]))
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let attacker = try ChildProcess(
                "/usr/bin/curl",
                [
                    "-s", "-o", directory + "/body", "-w", "%{http_code}", "--proxy", larder.proxy,
                    "http://forger.test:\(forger.port)\(path)",
                ])
            defer { attacker.kill() }
            // The attacker's fill is in flight (its origin waits 4 s before answering).
            var waited = 0
            while try forger.count(path) == 0, waited < 100 {
                usleep(20_000)
                waited += 1
            }
            let started = Date()
            let victim = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(official.port)\(path)"])
            let elapsed = Date().timeIntervalSince(started)
            #expect(victim.status == 200 && victim.body.count == layer.utf8.count && victim.text == layer, "\(victim.status)")
            #expect(elapsed < 3, "held by the forger for \(elapsed) s")
            #expect(try official.count(path) == 1, "fetched from its own host")
            attacker.waitUntilExit()
            let coalescing = try larder.stats().coalescing
            #expect(coalescing.coalesced == 0, "\(coalescing)")
            #expect(try Self.metric(larder, "larder_digest_mismatches_total") == 1)
        }

        /// The digest vouches for the body, not for what the host that sent it says: an entry
        /// any host can fill keeps only the fields that describe the bytes (and is sandboxed),
        /// so a planting host's cookies, redirects, download names, CORS and HSTS fields or
        /// Docker-Content-Digest never reach the clients of the official registry. Manifests,
        /// whose Content-Type clients read, are one entry per registry.
        @Test func aPlantedDigestEntryCarriesOnlyTheFieldsThatDescribeItsBytes() throws {
            let official = try Origin()
            let planter = try Origin()
            let layer = "the public layer"
            let hex = try Self.digest(layer)
            let blob = "/v2/lib/app/blobs/sha256:\(hex)"
            let manifest = "/v2/lib/app/manifests/sha256:\(hex)"
            let harmful: [(String, String)] = [
                ("Content-Type", "text/html"), ("Content-Disposition", "attachment; filename=setup.exe"),
                ("Refresh", "0; url=http://planter.test/"), ("Clear-Site-Data", "\"cookies\""),
                ("Docker-Content-Digest", "sha256:\(String(repeating: "0", count: 64))"),
                ("Link", "<http://planter.test/x.js>; rel=preload"),
                ("Access-Control-Allow-Origin", "*"), ("Strict-Transport-Security", "max-age=99999999; includeSubDomains"),
                ("Location", "http://planter.test/"), ("X-Planted", "1"), ("Content-Security-Policy", "script-src *"),
            ]
            try planter.script(blob, [.init(headers: harmful, body: layer)], conditional: false)
            try planter.script(manifest, [.init(headers: [("Content-Type", "text/plain")], body: layer)], conditional: false)
            try official.script(
                manifest, [.init(headers: [("Content-Type", "application/vnd.oci.image.manifest.v1+json")], body: layer)],
                conditional: false)
            let larder = try Larder(
                config: "[cache]\npresets = [\"oci\"]\n" + Self.resolve([("reg.test", official), ("planter.test", planter)]))
            #expect(try Curl.viaProxy(larder.proxy, ["http://planter.test:\(planter.port)\(blob)"]).text == layer)
            let victim = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(official.port)\(blob)"])
            #expect(victim.text == layer && victim.header("cache-status")?.hasPrefix("larder; hit") == true, "\(victim.headers)")
            for (name, _) in harmful where name != "Content-Type" && name != "Content-Security-Policy" {
                #expect(victim.header(name) == nil, "\(name) reached a client of another host")
            }
            #expect(victim.header("content-security-policy") == "sandbox", "\(victim.headers)")
            #expect(victim.header("x-content-type-options") == "nosniff")
            #expect(try official.count(blob) == 0)
            _ = try Curl.viaProxy(larder.proxy, ["http://planter.test:\(planter.port)\(manifest)"])
            let pulled = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(official.port)\(manifest)"])
            #expect(pulled.header("content-type") == "application/vnd.oci.image.manifest.v1+json", "\(pulled.headers)")
            #expect(try official.count(manifest) == 1, "manifests: one entry per registry")
        }

        /// A digest entry revalidated through another host (a route with a short ttl): that
        /// host's 304 freshens it, and changes none of the fields its clients get.
        @Test func aNotModifiedFromAnotherHostChangesNoFieldOfADigestEntry() throws {
            let official = try Origin()
            let planter = try Origin()
            let body = "content-addressed bytes"
            let path = "/cas/\(try Self.digest(body))"
            try official.script(
                path, [.init(headers: [("Content-Type", "application/octet-stream"), ("ETag", "\"v1\"")], body: body)],
                conditional: false)
            try planter.script(
                path,
                [
                    .init(
                        status: 304, headers: [("Content-Type", "text/html"), ("ETag", "\"v1\""), ("X-Planted", "1")], body: "")
                ], conditional: false)
            let larder = try Larder(
                config: "[[route]]\nmatch = \"*://*:*/cas/{digest}\"\ndigest = \"sha256\"\nttl = \"4s\"\n"
                    + Self.resolve([("cas.test", official), ("planter.test", planter)]))
            #expect(try Curl.viaProxy(larder.proxy, ["http://cas.test:\(official.port)\(path)"]).text == body)
            // Stale by then; freshened by the 304 for another 4 s, time for the victim's hit
            // on a loaded machine.
            usleep(4_500_000)
            let revalidated = try Curl.viaProxy(larder.proxy, ["http://planter.test:\(planter.port)\(path)"])
            #expect(revalidated.text == body, "\(revalidated.headers)")
            #expect(try planter.count(path) == 1, "revalidated through the other host")
            let victim = try Curl.viaProxy(larder.proxy, ["http://cas.test:\(official.port)\(path)"])
            #expect(victim.text == body && victim.header("cache-status")?.hasPrefix("larder; hit") == true, "\(victim.headers)")
            #expect(victim.header("content-type") == "application/octet-stream" && victim.header("x-planted") == nil, "\(victim.headers)")
            #expect(try official.count(path) == 1)
        }

        /// A digest entry revalidated through another host that answers 404 (or anything not
        /// stored) is not outdated by it: the digest pins the body, and the clients of the host
        /// that filled it keep their hit.
        @Test func anAnswerFromAnotherHostNeverRemovesADigestEntry() throws {
            let official = try Origin()
            let planter = try Origin()
            let body = "content-addressed bytes"
            let path = "/cas/\(try Self.digest(body))"
            try official.script(path, [.init(headers: [("ETag", "\"v1\"")], body: body)], conditional: false)
            try planter.script(path, [.init(status: 404, body: "gone")], conditional: false)
            let larder = try Larder(
                config: "[[route]]\nmatch = \"*://*:*/cas/{digest}\"\ndigest = \"sha256\"\nttl = \"1s\"\n"
                    + Self.resolve([("cas.test", official), ("planter.test", planter)]))
            #expect(try Curl.viaProxy(larder.proxy, ["http://cas.test:\(official.port)\(path)"]).text == body)
            usleep(1_500_000)
            #expect(try Curl.viaProxy(larder.proxy, ["http://planter.test:\(planter.port)\(path)"]).status == 404)
            #expect(try planter.count(path) == 1)
            // Stale (ttl 1 s), so revalidated with the official host: still stored, a 304 keeps it.
            try official.script(path, [.init(status: 304, headers: [("ETag", "\"v1\"")], body: "")], conditional: false)
            let victim = try Curl.viaProxy(larder.proxy, ["http://cas.test:\(official.port)\(path)"])
            #expect(victim.status == 200 && victim.text == body, "\(victim.status) \(victim.headers)")
            let conditional = try official.requests().last { $0.target == path }
            #expect(conditional?.headers.contains { $0.0.lowercased() == "if-none-match" } == true, "the entry was removed")
        }

        /// The digest names the bytes of the representation, not of a content coding of it: a
        /// gzip-coded 200 (an origin answering Accept-Encoding) goes to its own client as it
        /// is, unchecked and never stored or shared, instead of failing as a mismatch.
        @Test func aContentCodedAnswerGoesUncheckedToItsOwnClientOnly() throws {
            let origin = try Origin()
            let index = "Package: demo\n"
            let path = "/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/\(try Self.digest(index))"
            try origin.script(path, [.init(headers: [("Content-Encoding", "gzip")], body: "gzip-coded bytes")], conditional: false)
            let larder = try Larder(config: "[cache]\npresets = [\"debian\"]\n" + Self.resolve([("deb.debian.org", origin)]))
            for attempt in 1...2 {
                let coded = try Curl.viaProxy(larder.proxy, ["-H", "Accept-Encoding: gzip", "http://deb.debian.org:\(origin.port)\(path)"])
                #expect(coded.status == 200 && coded.text == "gzip-coded bytes", "\(coded.status) \(coded.headers)")
                #expect(try origin.count(path) == attempt, "never stored")
            }
            #expect(try Self.metric(larder, "larder_digest_mismatches_total") == 0)
        }

        /// The debian and ubuntu presets share by-hash files across every host when the body
        /// matches the digest (SHA-256 and SHA-512), and a mirror that serves another body
        /// fills nothing.
        @Test func presetsShareDebianAndUbuntuByHashFilesAcrossHostsWhenTheDigestMatches() throws {
            let official = try Origin()
            let mirror = try Origin()
            let index = "Package: demo\nVersion: 1.0\n"
            let forged = "Package: demo\nVersion: 6.6.6\n"
            let sha256Path = "/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/\(try Self.digest(index))"
            let sha512Path = "/ubuntu/dists/noble/main/binary-amd64/by-hash/SHA512/\(try Self.digest(index, "sha512"))"
            let plantedPath = "/debian/dists/bookworm/main/binary-arm64/by-hash/SHA256/\(try Self.digest(index + "arm64"))"
            for path in [sha256Path, sha512Path] {
                try mirror.script(path, [.init(body: index)], conditional: false)
                try official.script(path, [.init(body: index)], conditional: false)
            }
            try mirror.script(plantedPath, [.init(body: forged)], conditional: false)
            try official.script(plantedPath, [.init(body: index + "arm64")], conditional: false)
            let larder = try Larder(
                config: "[cache]\npresets = [\"debian\", \"ubuntu\"]\n"
                    + Self.resolve([
                        ("deb.debian.org", official), ("archive.ubuntu.com", official), ("ftp.xx.debian.org", mirror),
                        ("mirror.example", mirror),
                    ]))
            for (path, mirrorHost, officialHost) in [
                (sha256Path, "ftp.xx.debian.org", "deb.debian.org"), (sha512Path, "mirror.example", "archive.ubuntu.com"),
            ] {
                #expect(try Curl.viaProxy(larder.proxy, ["http://\(mirrorHost):\(mirror.port)\(path)"]).text == index)
                let shared = try Curl.viaProxy(larder.proxy, ["http://\(officialHost):\(official.port)\(path)"])
                #expect(shared.text == index && shared.header("cache-status")?.hasPrefix("larder; hit") == true, "\(shared.headers)")
                #expect(try official.count(path) == 0, "one entry per digest, whatever the host")
            }
            let planting = try Curl.viaProxy(larder.proxy, ["http://ftp.xx.debian.org:\(mirror.port)\(plantedPath)"])
            #expect(planting.status == 502)
            let victim = try Curl.viaProxy(larder.proxy, ["http://deb.debian.org:\(official.port)\(plantedPath)"])
            #expect(victim.status == 200 && victim.text == index + "arm64", "planted: \(victim.text)")
            #expect(try official.count(plantedPath) == 1)
        }

        /// `upstream.resolve` pins a name for requests and CONNECT tunnels alike, without the
        /// system resolver (`.invalid` never resolves, RFC 6761 §6.4).
        @Test func upstreamResolvePinsANameForRequestsAndTunnels() throws {
            let origin = try Origin()
            let larder = try Larder(
                config: "[proxy]\nconnect_ports = [\(origin.port)]\n" + Self.resolve([("pinned.invalid", origin)]))
            let url = "http://pinned.invalid:\(origin.port)/resolved?size=100"
            #expect(try Curl.viaProxy(larder.proxy, [url]).status == 200)
            let tunnelled = try Curl.viaProxy(larder.proxy, ["--proxytunnel", url])
            #expect(tunnelled.status == 200 && tunnelled.body.count == 100, "\(tunnelled.stderr)")
            #expect(try origin.count("/resolved?size=100") == 2)
            let unpinned = try Curl.viaProxy(larder.proxy, ["http://other.invalid:\(origin.port)/resolved"])
            #expect(unpinned.status == 502, "only the pinned name")
        }

        /// Only a checked 200 fills a digest entry: a 404 (or a HEAD's fields) from one host is
        /// neither kept under the shared key nor given to clients of another host.
        @Test func aFailureFromOneHostIsNeverPinnedUnderTheDigestKey() throws {
            let official = try Origin()
            let mirror = try Origin()
            let layer = "a layer published later"
            let path = "/v2/lib/a/blobs/sha256:\(try Self.digest(layer))"
            try official.script(path, [.init(body: layer)], conditional: false)
            try mirror.script(
                path, [.init(status: 404, headers: [("Cache-Control", "max-age=86400")], body: "not yet")], conditional: false)
            let larder = try Larder(
                config: "[cache]\npresets = [\"oci\"]\n" + Self.resolve([("reg.test", official), ("mirror.test", mirror)]))
            #expect(try Curl.viaProxy(larder.proxy, ["http://mirror.test:\(mirror.port)\(path)"]).status == 404)
            #expect(try Curl.viaProxy(larder.proxy, ["-I", "http://mirror.test:\(mirror.port)\(path)"]).status == 404)
            let victim = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(official.port)\(path)"])
            #expect(victim.status == 200 && victim.text == layer, "\(victim.status) \(victim.headers)")
            #expect(try official.count(path) == 1)
        }

        /// The examples that used to ship (`match = "http://*/{base}/pool/{file}"`, `key =
        /// "debian:{file}"`) let any client fill every mirror's entry: refused at the key's
        /// position, with the fix.
        @Test func checkConfigRefusesAHostFreeKeyOnAWildcardHostWithTheFix() throws {
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/larder.toml"
            try "[[route]]\nmatch = \"http://*/{base}/pool/{file}\"\nimmutable = true\nkey = \"debian:{file}\"\n"
                .write(toFile: path, atomically: true, encoding: .utf8)
            let check = try ChildProcess(Paths.larder, ["check-config", path])
            check.waitUntilExit()
            #expect(check.terminationStatus == 1)
            #expect(check.stderr.contains("\(path):4:7:"), "\(check.stderr)")
            #expect(check.stderr.contains("Add {host} to the key, or name the host in match"), "\(check.stderr)")
        }
    }
}
