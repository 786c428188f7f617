import Foundation
import Testing

extension IntegrationTests {
    /// `[cache] presets` end to end, against a local origin laid out like PyPI and a Debian
    /// mirror: artefacts kept whatever their headers say, indexes revalidated every time and
    /// served stale only when the origin fails.
    @Suite(.timeLimit(.minutes(2))) struct Presets {
        @Test func artefactsAreKeptAndIndexesRevalidatedOrServedStaleOnError() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[cache]\npresets = [\"pypi\", \"debian\"]\n")
            // Indexes: a validator, a lifetime, then (second script entry) the origin failing.
            for (path, body) in [
                ("/simple/demo/", "<a href=\"/packages/ab/cd/ef/demo-1.0-py3-none-any.whl\">demo</a>"),
                ("/debian/dists/bookworm/InRelease", "Origin: Debian"),
            ] {
                try origin.script(
                    path,
                    [
                        .init(status: 200, headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=600")], body: body),
                        .init(status: 200, headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=600")], body: body),
                        .init(status: 503, headers: [], body: "down"),
                    ], conditional: true)
                let first = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(first.status == 200 && first.text == body)
                let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(second.status == 200 && second.text == body)
                #expect(second.header("cache-status")?.contains("fwd=stale") == true, "revalidated although fresh: \(second.headers)")
                #expect(second.header("cache-status")?.contains("fwd-status=304") == true, "\(second.headers)")
                let requests = try origin.requests().filter { $0.target == path }
                #expect(requests.count == 2 && requests[1].headers.contains { $0.0.lowercased() == "if-none-match" }, "one conditional")
                let third = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(third.status == 200 && third.text == body, "the origin failed: the stored index, stale-if-error")
                #expect(third.header("cache-status")?.contains("stale-if-error") == true, "\(third.headers)")
            }
            // Artefacts: kept although the origin says no-cache; the second client never reaches it.
            for path in [
                "/packages/ab/cd/ef/demo-1.0-py3-none-any.whl?size=20000&cc=no-cache",
                "/debian/pool/main/d/demo/demo_1.0_all.deb?size=30000&cc=no-cache",
            ] {
                let first = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                let second = try Curl.viaProxy(larder.proxy, [origin.url(path)])
                #expect(first.status == 200 && second.body == first.body)
                #expect(second.header("cache-status")?.hasPrefix("larder; hit") == true, "\(path): \(second.headers)")
                #expect(try origin.count(path) == 1)
            }
            // Anything else keeps the HTTP rules: no-cache is revalidated (here: fetched again).
            for _ in 1...2 { #expect(try Curl.viaProxy(larder.proxy, [origin.url("/other?cc=no-cache")]).status == 200) }
            #expect(try origin.count("/other?cc=no-cache") == 2)
        }
    }
}
