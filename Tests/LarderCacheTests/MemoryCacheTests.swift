import LarderCache
import LarderHTTP
import Testing

@Suite struct MemoryCacheTests {
    @Test func storesAndFindsByKey() {
        let cache = MemoryCache(limits: Fixtures.limits())
        let stored = Fixtures.response("/a")
        #expect(cache.insert(stored))
        #expect(cache.lookup(Fixtures.key("/a"))?.first === stored)
        #expect(cache.lookup(Fixtures.key("/b")) == nil)
    }

    @Test func evictsLeastRecentlyUsedWhenEntryLimitIsReached() {
        let cache = MemoryCache(limits: Fixtures.limits(entries: 2))
        cache.insert(Fixtures.response("/a"))
        cache.insert(Fixtures.response("/b"))
        _ = cache.lookup(Fixtures.key("/a"))  // /a is now the most recently used
        cache.insert(Fixtures.response("/c"))
        #expect(cache.lookup(Fixtures.key("/a")) != nil)
        #expect(cache.lookup(Fixtures.key("/b")) == nil)
        #expect(cache.lookup(Fixtures.key("/c")) != nil)
        #expect(cache.statistics.evictions == 1)
    }

    @Test func keepsTotalBytesUnderTheLimit() {
        let cache = MemoryCache(limits: Fixtures.limits(bytes: 10_000, entries: 1000, object: 10_000))
        for index in 0..<50 { cache.insert(Fixtures.response("/\(index)", bodySize: 1000)) }
        let statistics = cache.statistics
        #expect(statistics.bytes <= 10_000)
        #expect(statistics.entries == statistics.bytes / Fixtures.response("/0", bodySize: 1000).memoryCost)
        #expect(cache.lookup(Fixtures.key("/49")) != nil)
        #expect(cache.lookup(Fixtures.key("/0")) == nil)
    }

    @Test func refusesObjectsOverThePerObjectLimit() {
        let cache = MemoryCache(limits: Fixtures.limits(object: 1000))
        #expect(!cache.insert(Fixtures.response("/big", bodySize: 100_000)))
        #expect(cache.lookup(Fixtures.key("/big")) == nil)
    }

    @Test func replacesTheVariantSelectedByTheSameRequestHeaders() {
        let cache = MemoryCache(limits: Fixtures.limits())
        let gzip = Fixtures.response("/v", vary: ["accept-encoding": "gzip"])
        let plain = Fixtures.response("/v", vary: ["accept-encoding": ""])
        let gzipAgain = Fixtures.response("/v", vary: ["accept-encoding": "gzip"])
        cache.insert(gzip)
        cache.insert(plain)
        cache.insert(gzipAgain)
        let variants = cache.lookup(Fixtures.key("/v")) ?? []
        #expect(variants.count == 2)
        #expect(variants.contains { $0 === gzipAgain })
        #expect(!variants.contains { $0 === gzip })
    }

    @Test func shrinkingTheLimitEvictsDownToIt() {
        let cache = MemoryCache(limits: Fixtures.limits(bytes: 100_000, entries: 1000))
        for index in 0..<20 { cache.insert(Fixtures.response("/\(index)", bodySize: 1000)) }
        cache.setLimits(Fixtures.limits(bytes: 5000, entries: 1000))
        #expect(cache.statistics.bytes <= 5000)
        #expect(cache.lookup(Fixtures.key("/19")) != nil)
    }

    @Test func removesByKeyAndClearsEverything() {
        let cache = MemoryCache(limits: Fixtures.limits())
        cache.insert(Fixtures.response("/a"))
        cache.insert(Fixtures.response("/b"))
        #expect(cache.remove(Fixtures.key("/a")))
        #expect(!cache.remove(Fixtures.key("/a")))
        cache.removeAll()
        #expect(cache.statistics.entries == 0)
        #expect(cache.statistics.bytes == 0)
    }

    @Test func listStaysConsistentUnderChurn() {
        // Random inserts, lookups and removals against a model of the expected contents.
        let cache = MemoryCache(limits: Fixtures.limits(bytes: 1 << 30, entries: 16, object: 1 << 20))
        var generator = SystemRandomNumberGenerator()
        var recency: [String] = []  // most recent last
        for _ in 0..<5000 {
            let path = "/\(Int.random(in: 0..<40, using: &generator))"
            switch Int.random(in: 0..<3, using: &generator) {
            case 0:
                cache.insert(Fixtures.response(path, bodySize: 10))
                recency.removeAll { $0 == path }
                recency.append(path)
                if recency.count > 16 { recency.removeFirst() }
            case 1:
                let found = cache.lookup(Fixtures.key(path)) != nil
                #expect(found == recency.contains(path))
                if found {
                    recency.removeAll { $0 == path }
                    recency.append(path)
                }
            default:
                #expect(cache.remove(Fixtures.key(path)) == recency.contains(path))
                recency.removeAll { $0 == path }
            }
        }
        #expect(cache.statistics.entries == recency.count)
    }
}
