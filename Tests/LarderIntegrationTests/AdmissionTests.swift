import Foundation
import Testing

extension IntegrationTests {
    /// `cache.admission`: once the disk tier is full, a response over
    /// `admission_min_bytes` is stored on its second request (TinyLFU's doorkeeper); while there
    /// is room, and with `admission = "always"`, every storable response is stored at once.
    @Suite(.timeLimit(.minutes(2))) struct Admission {
        static let budget = "[disk]\nmax_bytes = \"2MiB\"\n[memory]\nmax_bytes = \"1MiB\"\n"

        /// Fetches distinct 400 KB objects, each twice (stored by the second request once the
        /// tier is full), until the disk tier has evicted.
        static func fill(_ larder: Larder, _ origin: Origin) throws {
            for index in 0..<12 {
                for _ in 0..<2 {
                    #expect(try Curl.viaProxy(larder.proxy, [origin.url("/fill\(index)?size=400000&cc=max-age=600")]).status == 200)
                }
            }
            let evicted = try waitUntil {
                (try larder.stats().disk?.evictions ?? 0) > 0
            }
            #expect(evicted, "the disk tier never evicted")
        }

        @Test func aFullCacheStoresALargeResponseOnItsSecondRequest() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.budget)
            // Room left: stored on the first request.
            let early = "/early?size=300000&cc=max-age=600"
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(early)]).cacheStatus?.stored == true)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(early)]).cacheStatus?.hit == true)
            try Self.fill(larder, origin)

            // The filling itself may have been deferred after the first eviction.
            let deferredBefore = try larder.stats().admissionsDeferred ?? -1
            let large = "/large?size=300000&cc=max-age=600"
            let first = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(first.status == 200 && first.body.count == 300_000)
            #expect(first.cacheStatus?.stored == false, "\(first.header("cache-status") ?? "-")")
            #expect(first.cacheStatus?.detail == "admission-deferred")
            let second = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(second.cacheStatus?.hit == false && second.cacheStatus?.stored == true)
            #expect(second.cacheStatus?.detail == nil)
            let third = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(third.cacheStatus?.hit == true)
            #expect(try bodyMismatch(third.body, origin.directBody(large)) == nil)
            #expect(try origin.count(large) == 3, "two fills, one direct fetch")

            // At most admission_min_bytes (8 KiB): stored on the first request even now.
            let small = "/small?size=8192&cc=max-age=600"
            _ = try Curl.viaProxy(larder.proxy, [origin.url(small)])
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(small)]).cacheStatus?.hit == true)

            let deferred = try larder.stats().admissionsDeferred ?? -1
            #expect(deferred == deferredBefore + 1)
            let metrics = try Curl.run(["http://127.0.0.1:\(larder.adminPort)/metrics"]).text
            #expect(metrics.contains("\nlarder_cache_admissions_deferred_total \(deferred)\n"))
        }

        /// Without a disk tier the memory tier is the one whose fullness counts: its entry limit
        /// as well as its bytes.
        @Test func withoutADiskTierTheMemoryTierDecides() throws {
            let origin = try Origin()
            let larder = try Larder(config: "[memory]\nmax_entries = 3\n", cacheDirectory: "/dev/null/no-disk-tier")
            #expect(try larder.stats().disk == nil, "the disk tier must be missing for this test")
            for index in 0..<3 {
                let path = "/m\(index)?size=20000&cc=max-age=600"
                #expect(try Curl.viaProxy(larder.proxy, [origin.url(path)]).cacheStatus?.stored == true, "room: \(path)")
            }
            let large = "/large?size=20000&cc=max-age=600"
            let first = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(first.cacheStatus?.stored == false && first.cacheStatus?.detail == "admission-deferred")
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(large)]).cacheStatus?.stored == true)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(large)]).cacheStatus?.isMemoryHit == true)
            // Not over admission_min_bytes: stored at once, full or not.
            let small = "/small?size=4000&cc=max-age=600"
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(small)]).cacheStatus?.stored == true)
        }

        @Test func admissionAlwaysStoresEveryResponseOnItsFirstRequest() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.budget + "[cache]\nadmission = \"always\"\n")
            try Self.fill(larder, origin)
            let large = "/large?size=300000&cc=max-age=600"
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(large)]).cacheStatus?.stored == true)
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(large)]).cacheStatus?.hit == true)
            #expect(try larder.stats().admissionsDeferred == 0)
        }

        @Test func theMinimumSizeIsASetting() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.budget + "[cache]\nadmission_min_bytes = \"512KiB\"\n")
            try Self.fill(larder, origin)
            let large = "/large?size=300000&cc=max-age=600"
            _ = try Curl.viaProxy(larder.proxy, [origin.url(large)])
            #expect(try Curl.viaProxy(larder.proxy, [origin.url(large)]).cacheStatus?.hit == true)
        }
    }
}
