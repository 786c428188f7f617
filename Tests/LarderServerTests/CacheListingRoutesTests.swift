import LarderConfig
import Testing

@testable import LarderCache
@testable import LarderServer

/// A listed entry's route and the freshness a hit is served with under it.
@Suite struct CacheListingRoutesTests {
    static let routes = RouteTable(Preset.debian.routes)

    static func entry(key: String, url: String? = nil, status: Int = 200, age: Double = 100, ttl: Double = -260) -> TieredCache.Listing {
        TieredCache.Listing(
            key: CacheKey(normalized: key), vary: [:], bytes: 1, inMemory: true, onDisk: false, age: age, ttl: ttl, hits: 0, url: url,
            status: status)
    }

    @Test func aSuccessUnderCacheFirstLivesForTheRoutesTTLWhateverItsHeadersSay() {
        let stale = Self.entry(key: "debian:/debian/pool/a.deb")
        #expect(CacheListing.remainingFreshness(of: stale, policy: .cacheFirst, routeTTL: 1000, negativeTTL: 30) == 900)
        #expect(CacheListing.remainingFreshness(of: stale, policy: .http, routeTTL: 1000, negativeTTL: 30) == -260)
        let notFound = Self.entry(key: "http://h/a", status: 404, age: 10, ttl: 500)
        #expect(CacheListing.remainingFreshness(of: notFound, policy: .cacheFirst, routeTTL: 1000, negativeTTL: 30) == 20)
    }

    @Test func theRouteIsTheOneItsURLTakesElseTheOneWhoseKeyItsKeyBeginsWith() {
        let fetched = Self.entry(key: "debian:/debian/pool/a.deb", url: "http://deb.debian.org/debian/pool/a.deb")
        #expect(CacheListing.route(of: fetched, routes: Self.routes)?.key?.text == "debian:{path}")
        let older = Self.entry(key: "debian:/debian/pool/a.deb")
        #expect(CacheListing.route(of: older, routes: Self.routes)?.key?.text == "debian:{path}")
        let index = Self.entry(key: "http://deb.debian.org/debian/dists/bookworm/InRelease")
        #expect(CacheListing.route(of: index, routes: Self.routes)?.policy == .revalidate)
        #expect(CacheListing.route(of: Self.entry(key: "other:/x"), routes: Self.routes) == nil)
        let slice = Self.entry(key: "http://h.test/a.deb#slice=2")
        #expect(CacheListing.fetchedURL(of: slice) == "http://h.test/a.deb")
    }
}
