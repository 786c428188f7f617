import LarderCache
import Testing

@testable import LarderServer

/// Fill keys are equal exactly when every part is, whether or not they share their storage:
/// the coalescer's tables and the registry find a fill by a key built again from the request.
@Suite struct FillKeyTests {
    @Test func keysBuiltApartFromTheSamePartsAreOneKey() {
        let first = FillKey(method: "GET", url: "http://o/a", bodyHash: nil)
        let second = FillKey(method: "GET", url: "http://o/a", bodyHash: nil)
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(Set([first, second, first]).count == 1)
    }

    /// A key made from a cache key reuses its URL hash: it is the key made from the URL alone.
    @Test func aKeyFromACacheKeyIsTheKeyFromItsURL() {
        let cacheKey = CacheKey(normalized: "http://o/a")
        let fromCacheKey = FillKey(method: "GET", key: cacheKey, bodyHash: 7)
        let fromURL = FillKey(method: "GET", url: "http://o/a", bodyHash: 7)
        #expect(fromCacheKey == fromURL)
        #expect(fromCacheKey.hashValue == fromURL.hashValue)
        #expect(fromCacheKey.with(variant: ["a": "b"]) == fromURL.with(variant: ["a": "b"]))
        #expect(fromCacheKey.with(variant: ["a": "b"]).hashValue == fromURL.with(variant: ["a": "b"]).hashValue)
        #expect(FillKey(method: "GET", key: CacheKey(normalized: "http://o/b"), bodyHash: 7) != fromURL)
    }

    @Test func everyPartTellsKeysApart() {
        let base = FillKey(method: "GET", url: "http://o/a", bodyHash: 7, variant: ["accept-encoding": "gzip"])
        let others = [
            FillKey(method: "HEAD", url: "http://o/a", bodyHash: 7, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/b", bodyHash: 7, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: 8, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: nil, variant: ["accept-encoding": "gzip"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: 7, variant: ["accept-encoding": "br"]),
            FillKey(method: "GET", url: "http://o/a", bodyHash: 7),
        ]
        for other in others { #expect(other != base) }
        #expect(Set(others + [base]).count == others.count + 1)
        let variant = FillKey(method: "GET", url: "http://o/a", bodyHash: 7).with(variant: ["accept-encoding": "gzip"])
        #expect(variant == base)
        #expect(variant.method == "GET" && variant.url == "http://o/a" && variant.bodyHash == 7)
    }
}
