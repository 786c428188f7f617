import Foundation
import Testing

extension IntegrationTests {
    /// Attacks on the second wave of issue 59 (the Fill split, the Counter table, the Exchange
    /// state): what a misbehaving origin does must show in the counters the table declares.
    @Suite(.timeLimit(.minutes(3))) struct Review59WaveTwo {
        /// A body that does not hash to its URL's digest fails the exchange for good: the
        /// failure is counted under its reason and as an upstream error, as every other failure
        /// of the transfer is (the `digest` series was declared and never moved).
        @Test func aDigestMismatchIsCountedAsAFailureOfItsReason() throws {
            let origin = try Origin()
            let path = "/v2/lib/a/blobs/sha256:\(try SharedKeys.digest("the real layer"))"
            try origin.script(path, [.init(body: "a forged layer")], conditional: false)
            let larder = try Larder(config: "[cache]\npresets = [\"oci\"]\n" + SharedKeys.resolve([("reg.test", origin)]))
            let refused = try Curl.viaProxy(larder.proxy, ["http://reg.test:\(origin.port)\(path)"])
            #expect(refused.status == 502, "\(refused.status) \(refused.text)")
            let upstream = try larder.stats().upstream
            #expect(upstream.failures["digest"] == 1, "\(upstream.failures)")
            #expect(upstream.errors == 1, "no usable response: an upstream error")
        }

        /// RFC 9111 §4.3.5: a HEAD whose 200 matches the stored GET updates it as a 304 would;
        /// the counter that says so ("304 or matching HEAD") counts it.
        @Test func aMatchingHeadCountsAsARevalidation() throws {
            let origin = try Origin()
            func ok(_ version: String) -> Scripted {
                Scripted(headers: [("Cache-Control", "max-age=3600"), ("ETag", "\"h1\""), ("X-Version", version)], body: "same body")
            }
            try origin.script("/head-update", [ok("1"), ok("2")], conditional: false)
            let larder = try Larder()
            let url = origin.url("/head-update")
            let first = try Curl.viaProxy(larder.proxy, [url])
            #expect(first.header("x-version") == "1")
            let head = try Curl.viaProxy(larder.proxy, ["-I", "-H", "Cache-Control: no-cache", url])
            #expect(head.header("x-version") == "2", "\(head.headers)")
            let updated = try Curl.viaProxy(larder.proxy, [url])
            #expect(updated.header("x-version") == "2", "the HEAD updated the stored GET: \(updated.headers)")
            #expect(updated.header("cache-status")?.hasPrefix("larder; hit") == true)
            #expect(try larder.stats().upstream.revalidated == 1)
        }
    }
}
