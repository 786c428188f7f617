import Foundation
import Testing

extension IntegrationTests {
    /// Issue 57 item 3: what one client fetches through an immutable route must not fail for
    /// the others. Every preset's hosts are answered by the local origin as a parent proxy
    /// (no real name is resolved: a parent gets the absolute URL).
    @Suite(.timeLimit(.minutes(3))) struct NegativeAnswers {
        /// A config with every preset, everything through `origin`, and `extra`.
        static func config(origin: Origin, _ extra: String = "") -> String {
            let presets = ["debian", "ubuntu", "pypi", "npm", "cargo", "go", "oci", "github-releases", "rpm"]
            return "[upstream]\nparent = \"http://127.0.0.1:\(origin.port)\"\n[cache]\npresets = ["
                + presets.map { "\"\($0)\"" }.joined(separator: ", ") + "]\n" + extra
        }

        /// One URL per artefact route of every preset, and whether its key merges URLs (a
        /// `key` or `ignore_query`: then a failure is never stored at all).
        static let artefacts: [(url: String, merged: Bool)] = {
            // Digests of the right length, so that the digest routes take these URLs.
            let zeros = String(repeating: "0", count: 63)
            let (digest1, digest2, digest3) = (zeros + "1", zeros + "2", zeros + "3")
            return [
                ("http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/\(digest1)", true),
                ("http://deb.debian.org/debian/pool/main/c/curl/curl_9.0-1_amd64.deb", true),
                ("http://archive.ubuntu.com/ubuntu/dists/noble/main/binary-amd64/by-hash/SHA256/\(digest2)", true),
                ("http://archive.ubuntu.com/ubuntu/pool/main/c/curl/curl_9.0-1_amd64.deb", true),
                ("http://apt.mirror.test/debian/dists/x/main/by-hash/SHA256/0123abcd", false),
                ("http://apt.mirror.test/debian/pool/main/x/x_9.0_all.deb", false),
                ("http://apt.mirror.test/debian/pool/main/x/x_9.0_all.udeb", false),
                ("http://apt.mirror.test/debian/pool/main/x/x_9.0.dsc", false),
                ("http://apt.mirror.test/debian/pool/main/x/x_9.0.orig.tar.xz", false),
                ("http://files.pythonhosted.org/packages/ab/cd/ef0123/demo-9.0.tar.gz", false),
                ("http://pypi.mirror.test/packages/ab/cd/ef0123/demo-9.0-py3-none-any.whl", false),
                ("http://registry.npmjs.org/demo/-/demo-9.0.0.tgz", false),
                ("http://registry.yarnpkg.com/demo/-/demo-9.0.0.tgz", false),
                ("http://npm.mirror.test/@scope/demo/-/demo-9.0.0.tgz", false),
                ("http://static.crates.io/crates/demo/demo-9.0.0.crate", false),
                ("http://crates.io/api/v1/crates/demo/9.0.0/download", false),
                ("http://crates.mirror.test/crates/demo/demo-9.0.0.crate", false),
                ("http://proxy.golang.org/example.org/mod/@v/v9.0.0.zip", false),
                ("http://proxy.golang.org/example.org/mod/@v/v9.0.0.mod", false),
                ("http://proxy.golang.org/example.org/mod/@v/v9.0.0.info", false),
                ("http://registry-1.docker.io/v2/library/demo/blobs/sha256:0123abcd", false),
                ("http://registry-1.docker.io/v2/library/demo/blobs/sha256:\(digest3)", true),
                ("http://registry-1.docker.io/v2/library/demo/manifests/sha256:0123abcd", false),
                ("http://production.cloudflare.docker.com/registry-v2/docker/registry/v2/blobs/sha256/01/0123abcd/data", true),
                ("http://objects.githubusercontent.com/github-production-release-asset-2e65be/123/456", true),
                ("http://release-assets.githubusercontent.com/github-production-release-asset/123/456", true),
                ("http://rpm.mirror.test/fedora/39/Packages/d/demo-9.0-1.fc39.x86_64.rpm", false),
                ("http://rpm.mirror.test/fedora/39/repodata/0123abcd-primary.xml.zst", false),
            ]
        }()

        /// A 404 and a 410 that say they are fresh for a year, on each preset's artefact
        /// routes: kept as the HTTP rules say but only for `negative_ttl` (never, under a
        /// merged key), then the next request reaches the origin again.
        @Test func aFailureOnEveryPresetArtefactRouteIsRefetchedAfterTheNegativeTTL() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config(origin: origin, "negative_ttl = \"5s\"\n"))
            var asked: [(url: String, merged: Bool, status: Int)] = []
            for (url, merged) in Self.artefacts {
                for status in [404, 410] {
                    let target = url + "?status=\(status)&cc=max-age=31536000"
                    for attempt in 1...2 {
                        let answer = try Curl.viaProxy(larder.proxy, [target])
                        #expect(answer.status == status, "\(target) #\(attempt): \(answer.status)")
                    }
                    let expected = merged ? 2 : 1
                    #expect(try origin.count(target) == expected, "\(target): within negative_ttl, the HTTP rules")
                    asked.append((target, merged, status))
                }
            }
            Thread.sleep(forTimeInterval: 5.5)
            for (target, merged, status) in asked {
                let answer = try Curl.viaProxy(larder.proxy, [target])
                #expect(answer.status == status && answer.header("cache-status")?.contains("hit") == false, "\(target)")
                #expect(try origin.count(target) == (merged ? 3 : 2), "\(target): asked again after negative_ttl")
            }
        }

        /// no-store and private answers on an immutable route are not stored.
        @Test func privateAndNoStoreAnswersOnAnImmutableRouteAreNotStored() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config(origin: origin))
            for directive in ["no-store", "private", "private,max-age=3600"] {
                let target = "http://registry.npmjs.org/demo/-/demo-1.0.0.tgz?size=3000&cc=\(directive)"
                for _ in 1...2 { #expect(try Curl.viaProxy(larder.proxy, [target]).status == 200) }
                #expect(try origin.count(target) == 2, "\(directive): fetched each time")
            }
        }

        /// Under `ignore_query` (oci's signed storage URLs, github-releases), a request without
        /// the signature that met a 404 leaves nothing under the signed URLs' key: the next
        /// signed request reaches the origin and gets its blob.
        @Test func anUnsignedFailureUnderIgnoreQueryDoesNotAnswerSignedRequests() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config(origin: origin))
            for base in [
                "http://production.cloudflare.docker.com/registry-v2/docker/registry/v2/blobs/sha256/ab/abcd/data",
                "http://objects.githubusercontent.com/github-production-release-asset-2e65be/123/456",
                "http://release-assets.githubusercontent.com/github-production-release-asset/123/456",
            ] {
                try origin.script(
                    base, [.init(status: 404, headers: [("Cache-Control", "max-age=3600")], body: "unsigned")], conditional: false)
                let unsigned = try Curl.viaProxy(larder.proxy, [base])
                #expect(unsigned.status == 404)
                // Only signature parameters: the key is the unsigned URL's.
                let signed = base + "?X-Amz-Signature=abc&X-Amz-Expires=60"
                for attempt in 1...2 {
                    let answer = try Curl.viaProxy(larder.proxy, [signed])
                    #expect(answer.status == 200 && answer.body.count == 64, "\(signed) #\(attempt): \(answer.status)")
                }
                #expect(try origin.count(signed) == 1, "the signed answer is stored and reused")
            }
        }

        /// Nor does it remove what the signed requests stored, whatever the route's policy: an
        /// unsigned request's no-cache, or its revalidation of a stale entry, meets a 403 that
        /// says nothing of the signed object.
        @Test func anUnsignedFailureUnderIgnoreQueryLeavesTheSignedEntry() throws {
            let origin = try Origin()
            for policy in ["http", "stale_while_revalidate"] {
                let larder = try Larder(
                    config: "[retry]\nstrategy = \"none\"\n[[route]]\nmatch = \"http://127.0.0.1:*/blob/*\"\n"
                        + "ignore_query = [\"sig\"]\nimmutable = true\npolicy = \"\(policy)\"\n")
                let path = "/blob/\(policy)"
                try origin.script(
                    path + "?sig=1", [Scripted(headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=1")], body: "blob")],
                    conditional: true)
                try origin.script(path, [Scripted(status: 403, body: "unsigned")], conditional: false)
                #expect(try Curl.viaProxy(larder.proxy, [origin.url(path + "?sig=1")]).text == "blob")
                _ = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: no-cache", origin.url(path)])
                Thread.sleep(forTimeInterval: 1.5)
                _ = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                Thread.sleep(forTimeInterval: 0.3)  // a background refresh, if any, has ended
                let signed = try Curl.viaProxy(larder.proxy, [origin.url(path + "?sig=1")])
                // Answered from the entry (a hit, or a 304 to its revalidation), not fetched anew.
                #expect(
                    signed.text == "blob" && signed.header("cache-status")?.contains("uri-miss") == false,
                    "\(policy): \(signed.headers)")
            }
        }

        /// URLs that only look like packages (the suffix in the query, or followed by more, or
        /// a directory where files are) follow the HTTP rules: an answer without a lifetime is not kept.
        @Test func aURLThatOnlyLooksLikeAPackageIsNotKeptAsOne() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config(origin: origin))
            for target in [
                "http://rpm.mirror.test/search?q=foo.rpm",
                "http://rpm.mirror.test/etc/x.rpmnew/y",
                "http://pypi.mirror.test/packages/ab/cd/ef/demo.whl.html",
                "http://npm.mirror.test/-/v1/search?text=a/-/b.tgz",
                "http://crates.mirror.test/crates/demo.crate.sha256",
                "http://go.mirror.test/example.org/mod/@v/v1.0.0.info/x",
                "http://apt.mirror.test/debian/pool/main/x/x.tar.gz.asc",
                // Directory listings: they change whenever the repository does.
                "http://rpm.mirror.test/fedora/39/repodata/",
                "http://rpm.mirror.test/fedora/39/repodata/?C=M;O=A",
                "http://apt.mirror.test/debian/dists/x/main/by-hash/SHA256/",
            ] {
                for _ in 1...2 { #expect(try Curl.viaProxy(larder.proxy, [target]).status == 200) }
                #expect(try origin.count(target) == 2, "\(target) is not an artefact")
            }
        }

        /// A stored artefact outlives a later failure for its URL: a client's no-cache is
        /// answered from the cache, and a request the origin must judge (If-Match) gets the
        /// origin's 404 for itself, while the stored artefact keeps answering everyone else.
        @Test func aFailureNeverReplacesAStoredImmutableArtefact() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config(origin: origin))
            let target = "http://registry.npmjs.org/demo/-/demo-1.0.0.tgz"
            try origin.script(
                target,
                [
                    .init(status: 200, headers: [], body: "package-bytes"),
                    .init(status: 404, headers: [("Cache-Control", "max-age=3600")], body: "gone"),
                ], conditional: false)
            #expect(try Curl.viaProxy(larder.proxy, [target]).text == "package-bytes")
            let noCache = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: no-cache", target])
            #expect(noCache.text == "package-bytes" && noCache.header("cache-status")?.hasPrefix("larder; hit") == true)
            let judged = try Curl.viaProxy(larder.proxy, ["-H", "If-Match: \"other\"", target])
            #expect(judged.status == 404, "the origin's answer to the request it judged")
            for attempt in 1...2 {
                let later = try Curl.viaProxy(larder.proxy, [target])
                #expect(later.status == 200 && later.text == "package-bytes", "#\(attempt): \(later.status) \(later.headers)")
                #expect(later.header("cache-status")?.hasPrefix("larder; hit") == true)
            }
            #expect(try origin.count(target) == 2)
        }

        /// The same for an artefact kept as slices: a client's no-cache goes to the origin
        /// (slices answer only requests that accept stored copies) and meets a 404 that says it
        /// is fresh for an hour; that 404 must not become a whole entry in front of the slices.
        @Test func aClientsNoCacheFailureDoesNotHideAStoredSlicedArtefact() throws {
            let origin = try RawOrigin()
            let path = "/pkg/big-1.0.tar.gz"
            let text = String(repeating: "abcdefghijklmnop", count: (300 << 10) / 16)
            origin.script(
                path, .init("HTTP/1.1 200 OK\r\nContent-Length: \(text.utf8.count)\r\nETag: \"v1\"\r\nConnection: close\r\n\r\n" + text))
            let larder = try Larder(
                config: "[cache]\nslice_size = \"64KiB\"\n[[route]]\nmatch = \"http://127.0.0.1:*/pkg/*\"\nimmutable = true\n")
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).text == text)
            // The slices are written by the disk thread: wait (bounded) until they answer alone.
            var sliced = false
            for _ in 1...50 where !sliced {
                sliced = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", origin.url(path)]).text == text
                if !sliced { Thread.sleep(forTimeInterval: 0.1) }
            }
            #expect(sliced && origin.count(path) == 1, "kept as slices")
            origin.script(
                path,
                .init("HTTP/1.1 404 Not Found\r\nCache-Control: max-age=3600\r\nContent-Length: 4\r\nConnection: close\r\n\r\ngone"))
            let noCache = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: no-cache", origin.url(path)])
            #expect(noCache.status == 404 && origin.count(path) == 2, "no-cache went to the origin")
            for attempt in 1...2 {
                let later = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(later.status == 200 && later.text == text, "#\(attempt): \(later.status) \(later.headers)")
            }
            #expect(origin.count(path) == 2, "the slices answered")
        }

        /// A client's own preconditions go to the origin on a miss, and the origin's answer to
        /// them is that client's alone: a 304 to its If-None-Match or a 412 to its If-Match is
        /// neither handed to a plain request that arrived meanwhile (a body-less 304 to a
        /// request that had no validator) nor stored for the requests after it.
        @Test func anAnswerToAClientsOwnPreconditionsReachesNoOtherClient() throws {
            let origin = try Origin()
            let larder = try Larder()
            try origin.script(
                "/own-304", [Scripted(headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=60")], body: "hello", delay: 1)],
                conditional: true)
            try origin.script(
                "/own-412",
                [
                    Scripted(status: 412, headers: [("Cache-Control", "max-age=60")], body: "failed", delay: 1),
                    Scripted(headers: [("Cache-Control", "max-age=60")], body: "hello"),
                ], conditional: false)
            for (path, condition, status) in [("/own-304", "If-None-Match: \"v1\"", 304), ("/own-412", "If-Match: \"x\"", 412)] {
                // The conditional request first; a plain one while the origin takes its time.
                let conditional = try ChildProcess(
                    "/usr/bin/curl",
                    ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--proxy", larder.proxy, "-H", condition, origin.url(path)],
                    environment: ["PATH": "/usr/bin:/bin"])
                Thread.sleep(forTimeInterval: 0.3)
                let plain = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                conditional.waitUntilExit()
                #expect(conditional.stdout == String(status), "\(path): the client's own answer")
                #expect(plain.status == 200 && plain.text == "hello", "\(path): \(plain.status) \(plain.headers)")
                let later = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(later.status == 200 && later.text == "hello", "\(path) later: \(later.status) \(later.headers)")
            }
        }

        /// A range passed upstream as the client sent it (an object too large to fetch whole)
        /// that the origin refuses: its 416, fresh for a minute by the origin's own headers, is
        /// not stored under the URL, where it would answer every plain GET.
        @Test func aRefusedRangeIsNotStoredForPlainRequests() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\nslice_size = \"0\"\nrange_whole_max = \"1KiB\"\n")
            let target = origin.url("/big?ranges=1&size=5000&cc=max-age=60")
            let refused = try Curl.viaProxy(larder.proxy, ["-H", "Range: bytes=9000-", target])
            #expect(refused.status == 416)
            for attempt in 1...2 {
                let plain = try Curl.viaProxy(larder.proxy, [target])
                #expect(plain.status == 200 && plain.body.count == 5000, "#\(attempt): \(plain.status) \(plain.headers)")
            }
        }

        /// On a route that bypasses the cache, a Range goes upstream as it is: two clients
        /// asking for different ranges of one URL at once must each get their own bytes, not
        /// share one fetch.
        @Test func rangesSentAsTheyAreShareNoFetch() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\ndefault_policy = \"network_only\"\n")
            let target = origin.url("/ranged?ranges=1&size=1000&delay=1")
            let first = try ChildProcess(
                "/usr/bin/curl",
                ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--proxy", larder.proxy, "-H", "Range: bytes=0-3", target],
                environment: ["PATH": "/usr/bin:/bin"])
            Thread.sleep(forTimeInterval: 0.3)
            let second = try Curl.viaProxy(larder.proxy, ["-H", "Range: bytes=10-19", target])
            first.waitUntilExit()
            let whole = try origin.directBody("/ranged?ranges=1&size=1000")
            #expect(second.status == 206 && second.body == whole[10..<20], "\(second.status) \(second.headers)")
            #expect(first.stdout == "206")
        }

        /// stale-while-revalidate is for successes: a 404 that allows it for a year, once past
        /// its lifetime, is not served while a refresh runs, since a refresh whose answer is not
        /// stored (a 200 with Set-Cookie, no-store, private) would leave it answering everyone.
        @Test func aStoredFailureIsNotServedStaleWhileRevalidated() throws {
            let origin = try Origin()
            let larder = try Larder()
            try origin.script(
                "/published",
                [
                    Scripted(status: 404, headers: [("Cache-Control", "max-age=1, stale-while-revalidate=31536000")], body: "missing"),
                    Scripted(headers: [("Set-Cookie", "lb=1")], body: "published"),
                ], conditional: false)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/published")]).status == 404)
            Thread.sleep(forTimeInterval: 1.5)
            for attempt in 1...2 {
                let later = try Curl.viaProxy(larder.proxy, [origin.url("/published")])
                #expect(later.status == 200 && later.text == "published", "#\(attempt): \(later.status) \(later.headers)")
            }
        }

        /// A sliced immutable object with one slice stored: fetching the next slice for a whole
        /// answer meets a 503. That client's answer is cut short, but the failure says nothing
        /// of the object: the stored slice stays and answers the next request on its own.
        @Test func aFailedSliceFetchLeavesTheStoredSlices() throws {
            let origin = try RawOrigin()
            let path = "/pkg/sliced-1.0.tar.gz"
            let slice = String(repeating: "abcdefghijklmnop", count: (64 << 10) / 16)
            origin.script(
                path,
                .init(
                    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-65535/196608\r\nContent-Length: 65536\r\n"
                        + "ETag: \"v1\"\r\nConnection: close\r\n\r\n" + slice))
            let larder = try Larder(
                config: "[retry]\nstrategy = \"none\"\n[cache]\nslice_size = \"64KiB\"\n"
                    + "[[route]]\nmatch = \"http://127.0.0.1:*/pkg/*\"\nimmutable = true\n")
            let first = try Curl.viaProxy(larder.proxy, ["-H", "Range: bytes=0-99", origin.url(path)])
            #expect(first.status == 206 && first.text == String(slice.prefix(100)))
            // The slice is written by the disk thread: wait (bounded) until it answers alone.
            func storedSliceAnswers() throws -> Bool {
                let answer = try Curl.viaProxy(
                    larder.proxy, ["-H", "Cache-Control: only-if-cached", "-H", "Range: bytes=0-99", origin.url(path)])
                return answer.status == 206 && answer.text == String(slice.prefix(100))
            }
            var stored = false
            for _ in 1...50 where !stored {
                stored = try storedSliceAnswers()
                if !stored { Thread.sleep(forTimeInterval: 0.1) }
            }
            #expect(stored && origin.count(path) == 1, "slice 0 stored")
            origin.script(path, .init("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy"))
            let whole = try Curl.run(["--proxy", larder.proxy, origin.url(path)])
            #expect(whole.body.count < 196608, "the whole answer is cut short")
            #expect(origin.count(path) == 2, "slice 1 was asked for")
            #expect(try storedSliceAnswers(), "slice 0 is still stored")
        }
    }
}
