import LarderHTTP
import Testing

@testable import LarderCache

/// A slice sent in parts (a server that caps ranges) is put back together only from parts
/// that follow each other exactly under the same validators and length (RFC 9111 §3.4);
/// anything else drops what was written, and nothing waits without bound.
@Suite(.timeLimit(.minutes(1))) struct SliceAssembliesTests {
    static let headers: HTTPHeaders = ["Cache-Control": "max-age=60", "ETag": "\"a\""]
    static let slice = ContentRange(first: 200, last: 299, length: 1000)
    static let object = pattern(1000, seed: 7)

    /// The write of slice 2 of `key`, begun as the storage sink begins it for a first part.
    static func begin(_ cache: TieredCache, _ key: CacheKey) throws -> SliceAssemblies.Pending {
        var head = DiskEntryFormat.Head(
            key: key.slice(2).url, status: 206, reason: "Partial Content", requestTime: 100, responseTime: 101, vary: [:],
            headers: headers)
        head.headers.add("Content-Range", slice.fieldValue)
        let write = try #require(cache.beginDiskWrite(key: key.slice(2), head: head, expectedLength: 100))
        return SliceAssemblies.Pending(key: key.slice(2), write: write, slice: slice, headers: headers)
    }

    static func range(_ bytes: ClosedRange<Int>) -> ContentRange {
        ContentRange(first: bytes.lowerBound, last: bytes.upperBound, length: 1000)
    }

    @Test func partsThatFollowEachOtherMakeTheSlice() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/parts")
        var pending = try Self.begin(cache, key)
        pending.append(Array(Self.object[200..<240]))
        cache.assemblies.settle(pending, now: 10)
        #expect(cache.assemblies.count == 1)
        for part in [240...279, 280...299] {
            var next = try #require(cache.assemblies.take(key.slice(2), for: Self.range(part), headers: Self.headers, now: 11))
            next.append(Array(Self.object[part]))
            cache.assemblies.settle(next, now: 11)
        }
        fixture.cache.drain()
        #expect(cache.assemblies.count == 0)
        let stored = SlicedDiskWriteTests.slice(fixture.cache, key, 2)
        #expect(stored?.range == "bytes 200-299/1000")
        #expect(stored?.body == Array(Self.object[200..<300]))
    }

    /// Each row: a second part that may not continue the first (200-239, ETag "a", of 1000).
    @Test(
        arguments: [
            ("another ETag", 240...299, ["Cache-Control": "max-age=60", "ETag": "\"b\""], 1000, 11.0),
            (
                "a Last-Modified the first lacked", 240...299,
                [
                    "Cache-Control": "max-age=60", "ETag": "\"a\"", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT",
                ], 1000, 11
            ),
            ("an overlap", 230...299, headers, 1000, 11),
            ("a gap", 250...299, headers, 1000, 11),
            ("another length", 240...299, headers, 2000, 11),
            ("past the slice", 240...349, headers, 1000, 11),
            ("too late", 240...299, headers, 1000, 10 + SliceAssemblies.maxWait + 1),
        ] as [(String, ClosedRange<Int>, HTTPHeaders, Int, Double)])
    func aPartThatDoesNotFollowDropsTheWrite(
        _ name: String, _ part: ClosedRange<Int>, _ headers: HTTPHeaders, _ length: Int, _ now: Double
    ) throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/mixed")
        var pending = try Self.begin(cache, key)
        pending.append(Array(Self.object[200..<240]))
        cache.assemblies.settle(pending, now: 10)
        let range = ContentRange(first: part.lowerBound, last: part.upperBound, length: length)
        #expect(cache.assemblies.take(key.slice(2), for: range, headers: headers, now: now) == nil, "\(name)")
        #expect(cache.assemblies.count == 0, "\(name): the write is dropped")
        fixture.cache.drain()
        #expect(SlicedDiskWriteTests.slice(fixture.cache, key, 2) == nil, "\(name)")
    }

    @Test func aPartLongerThanTheSliceIsNeverStored() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/long")
        var pending = try Self.begin(cache, key)
        pending.append(Array(Self.object[200..<240]))
        pending.append(Array(Self.object[240..<310]))
        cache.assemblies.settle(pending, now: 10)
        fixture.cache.drain()
        #expect(cache.assemblies.count == 0)
        #expect(SlicedDiskWriteTests.slice(fixture.cache, key, 2) == nil)
    }

    @Test func aWriteWaitingTooLongIsDroppedBySweep() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        var pending = try Self.begin(cache, Fixtures.key("/idle"))
        pending.append(Array(Self.object[200..<240]))
        cache.assemblies.settle(pending, now: 10)
        cache.expireSliceParts(now: 10 + SliceAssemblies.maxWait)
        #expect(cache.assemblies.count == 1)
        cache.expireSliceParts(now: 10 + SliceAssemblies.maxWait + 1)
        #expect(cache.assemblies.count == 0)
    }

    @Test func atMostSoManyWritesWait() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        for index in 0...SliceAssemblies.maxWaiting {
            var pending = try Self.begin(cache, Fixtures.key("/waiting/\(index)"))
            pending.append(Array(Self.object[200..<240]))
            cache.assemblies.settle(pending, now: 10 + Double(index) / 10)
        }
        #expect(cache.assemblies.count == SliceAssemblies.maxWaiting)
        // The one waiting longest went.
        #expect(
            cache.assemblies.take(Fixtures.key("/waiting/0").slice(2), for: Self.range(240...299), headers: Self.headers, now: 20) == nil)
        let last = Fixtures.key("/waiting/\(SliceAssemblies.maxWaiting)").slice(2)
        #expect(cache.assemblies.take(last, for: Self.range(240...299), headers: Self.headers, now: 20) != nil)
    }
}
