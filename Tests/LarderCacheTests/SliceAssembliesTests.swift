import LarderHTTP
import Testing

@testable import LarderCache

/// A slice sent in parts (a server that caps ranges) is put back together, one assembly per
/// slice, from every part that holds its next byte under the same validators and length
/// (RFC 9111 §3.4), whichever client's request it answers and whether or not the part before
/// it ended; a part that may not join stores nothing and leaves the assembly as it is, and
/// nothing is kept once no byte came for a while.
@Suite(.timeLimit(.minutes(1))) struct SliceAssembliesTests {
    static let headers: HTTPHeaders = ["Cache-Control": "max-age=60", "ETag": "\"a\""]
    static let slice = ContentRange(first: 200, last: 299, length: 1000)
    static let object = pattern(1000, seed: 7)

    static func range(_ bytes: ClosedRange<Int>, length: Int = 1000) -> ContentRange {
        ContentRange(first: bytes.lowerBound, last: bytes.upperBound, length: length)
    }

    /// The part of slice 2 of `key` (bytes 200-299) an answer holding `bytes` is, joined as the
    /// storage sink joins it.
    static func join(
        _ cache: TieredCache, _ key: CacheKey, _ bytes: ClosedRange<Int>, headers: HTTPHeaders = headers, length: Int = 1000,
        now: Double = 10
    ) -> SliceAssemblies.Part? {
        cache.assemblies.join(key.slice(2), slice: slice, range: range(bytes, length: length), headers: headers, now: now) {
            var head = DiskEntryFormat.Head(
                key: key.slice(2).url, status: 206, reason: "Partial Content", requestTime: 100, responseTime: 101, vary: [:],
                headers: headers)
            head.headers.add("Content-Range", slice.fieldValue)
            return cache.beginDiskWrite(key: key.slice(2), head: head, expectedLength: 100)
        }
    }

    /// A part's whole answer, in one chunk.
    static func send(_ part: inout SliceAssemblies.Part, _ bytes: ClosedRange<Int>) {
        part.append(Array(object[bytes]))
    }

    static func stored(_ fixture: DiskFixture, _ key: CacheKey) -> [UInt8]? {
        fixture.cache.drain()
        let stored = SlicedDiskWriteTests.slice(fixture.cache, key, 2)
        if let stored { #expect(stored.range == "bytes 200-299/1000") }
        return stored?.body ?? nil
    }

    // MARK: The rules, as values

    /// Each row: a part holding `part` with `headers` of an object of `length`, against an
    /// assembly of bytes 200-299 that waits for byte 240 (ETag "a"); nil: it joins.
    @Test(
        arguments: [
            ("the next bytes", 240...299, headers, 1000, nil),
            ("the next bytes, to part of the rest", 240...259, headers, 1000, nil),
            ("an overlap holding the next byte", 230...299, headers, 1000, nil),
            ("the slice again from its first byte", 200...299, headers, 1000, nil),
            ("another ETag", 240...299, ["Cache-Control": "max-age=60", "ETag": "\"b\""], 1000, .otherRepresentation),
            (
                "a Last-Modified the first lacked", 240...299,
                ["ETag": "\"a\"", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"], 1000, .otherRepresentation
            ),
            ("another length", 240...299, headers, 2000, .otherRepresentation),
            ("a gap", 250...299, headers, 1000, .gap),
            ("bytes written already", 200...239, headers, 1000, .nothingNew),
            ("past the slice", 240...349, headers, 1000, .outsideSlice),
            ("before the slice", 150...249, headers, 1000, .outsideSlice),
        ] as [(String, ClosedRange<Int>, HTTPHeaders, Int, SliceAssemblies.Progress.Refusal?)])
    func whichPartsJoin(
        _ name: String, _ part: ClosedRange<Int>, _ headers: HTTPHeaders, _ length: Int,
        _ expected: SliceAssemblies.Progress.Refusal?
    ) {
        var progress = SliceAssemblies.Progress(slice: Self.slice, headers: Self.headers, now: 10)
        _ = progress.feed(at: 200, count: 40, partEnd: 300)
        let refusal = progress.refusal(of: Self.range(part, length: length), headers: headers)
        #expect(refusal == expected, "\(name)")
    }

    /// Each row: a part's chunk of `count` bytes at `position` (its range ending before
    /// `end`) against an assembly waiting for byte 240; what is written, and the next byte.
    @Test(
        arguments: [
            ("the next bytes", 240, 20, 300, .write(offset: 0), 260),
            ("bytes written already, then new ones", 230, 20, 300, .write(offset: 10), 250),
            ("bytes written already", 210, 30, 300, .skip, 240),
            ("bytes past the next one", 250, 10, 300, .skip, 240),
            ("more than the part's range", 240, 20, 250, .overrun, 240),
        ] as [(String, Int, Int, Int, SliceAssemblies.Progress.Feed, Int)])
    func whatAChunkWrites(
        _ name: String, _ position: Int, _ count: Int, _ end: Int, _ expected: SliceAssemblies.Progress.Feed, _ next: Int
    ) {
        var progress = SliceAssemblies.Progress(slice: Self.slice, headers: Self.headers, now: 10)
        _ = progress.feed(at: 200, count: 40, partEnd: 300)
        let feed = progress.feed(at: position, count: count, partEnd: end)
        #expect(feed == expected, "\(name)")
        #expect(progress.next == next, "\(name)")
    }

    /// No byte for ``SliceAssemblies/maxWait`` seconds, between parts or within one, and the
    /// assembly is over; each byte that comes starts the wait again.
    @Test func anAssemblyStallsOnlyWithoutBytes() {
        var progress = SliceAssemblies.Progress(slice: Self.slice, headers: Self.headers, now: 10)
        var looks: [Bool] = [10 + SliceAssemblies.maxWait, 10 + SliceAssemblies.maxWait + 1].map { progress.stalled(now: $0) }
        #expect(looks == [false, true])
        _ = progress.feed(at: 200, count: 40, partEnd: 300)
        looks = [100, 100 + SliceAssemblies.maxWait, 100 + SliceAssemblies.maxWait + 1].map { progress.stalled(now: $0) }
        #expect(looks == [false, false, true], "a byte came: the wait starts again from the look that saw it")
    }

    // MARK: Carried out on a disk tier

    @Test func partsThatFollowEachOtherMakeTheSlice() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/parts")
        for bytes in [200...239, 240...279, 280...299] {
            var part = try #require(Self.join(cache, key, bytes))
            Self.send(&part, bytes)
            part.end(succeeded: true)
        }
        #expect(cache.assemblies.count == 0)
        #expect(Self.stored(fixture, key) == Array(Self.object[200...299]))
    }

    /// The follow-up's head came before the answer of the part before it ended: it joins
    /// once that part's bytes are all written, and the slice is stored.
    @Test func aFollowUpJoinsBeforeThePartBeforeItEnded() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/early")
        var first = try #require(Self.join(cache, key, 200...239))
        Self.send(&first, 200...239)
        var second = try #require(Self.join(cache, key, 240...299))
        first.end(succeeded: true)
        Self.send(&second, 240...299)
        second.end(succeeded: true)
        #expect(Self.stored(fixture, key) == Array(Self.object[200...299]))
    }

    /// Two clients' parts of one slice: the second client's first part neither replaces nor
    /// spoils the assembly under way; its parts that hold the next byte continue it, its
    /// bytes already written are skipped, and the slice is the object's bytes.
    @Test func twoClientsPartsMakeOneSlice() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/two")
        var a1 = try #require(Self.join(cache, key, 200...239))
        Self.send(&a1, 200...239)
        a1.end(succeeded: true)
        // B's first part: a part of the same slice again, capped shorter.
        var b1 = try #require(Self.join(cache, key, 200...259), "it holds the next byte")
        var a2 = try #require(Self.join(cache, key, 240...279))
        b1.append(Array(Self.object[200...229]))
        a2.append(Array(Self.object[240...249]))
        b1.append(Array(Self.object[230...259]))
        a2.append(Array(Self.object[250...279]))
        a2.end(succeeded: true)
        b1.end(succeeded: true)
        // Both clients' next parts hold byte 280: B's writes it, A's finds it written.
        var a3 = try #require(Self.join(cache, key, 280...299))
        var b2 = try #require(Self.join(cache, key, 260...299))
        Self.send(&b2, 260...299)
        Self.send(&a3, 280...299)
        a3.end(succeeded: true)
        #expect(cache.assemblies.count == 1, "complete once the answer that wrote its last byte ends")
        b2.end(succeeded: true)
        #expect(cache.assemblies.count == 0)
        #expect(Self.stored(fixture, key) == Array(Self.object[200...299]))
    }

    /// Parts that may not join store nothing and leave the assembly as it was: the parts that
    /// follow still complete the slice.
    @Test func aPartThatMayNotJoinLeavesTheAssembly() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/refused")
        var first = try #require(Self.join(cache, key, 200...239))
        Self.send(&first, 200...239)
        first.end(succeeded: true)
        #expect(Self.join(cache, key, 240...299, headers: ["ETag": "\"b\""]) == nil)
        #expect(Self.join(cache, key, 240...299, length: 2000) == nil)
        #expect(Self.join(cache, key, 250...299) == nil)
        #expect(Self.join(cache, key, 200...239) == nil)
        #expect(cache.assemblies.count == 1)
        var rest = try #require(Self.join(cache, key, 240...299))
        Self.send(&rest, 240...299)
        rest.end(succeeded: true)
        #expect(Self.stored(fixture, key) == Array(Self.object[200...299]))
    }

    /// A part whose answer is cut short keeps the bytes it wrote (each at its place, under the
    /// validator); another part continues from the next one.
    @Test func aPartCutShortLeavesItsBytesForTheNext() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/cut")
        var first = try #require(Self.join(cache, key, 200...259))
        first.append(Array(Self.object[200...229]))
        first.end(succeeded: false)
        var rest = try #require(Self.join(cache, key, 230...299))
        Self.send(&rest, 230...299)
        rest.end(succeeded: true)
        #expect(Self.stored(fixture, key) == Array(Self.object[200...299]))
    }

    /// The part that wrote the slice's last byte fails, or a part sends more than its range:
    /// the assembly is dropped and nothing is stored.
    @Test(arguments: ["the last part fails", "a part overruns its range"])
    func aPartThatBetraysItsRangeDropsTheAssembly(_ name: String) throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/dropped")
        var first = try #require(Self.join(cache, key, 200...239))
        Self.send(&first, 200...239)
        first.end(succeeded: true)
        var rest = try #require(Self.join(cache, key, 240...299))
        if name == "the last part fails" {
            Self.send(&rest, 240...299)
            rest.end(succeeded: false)
        } else {
            rest.append(Array(Self.object[240...269]))
            rest.append(Array(Self.object[270...299]) + [0])
            rest.end(succeeded: true)
        }
        #expect(cache.assemblies.count == 0, "\(name)")
        #expect(Self.stored(fixture, key) == nil, "\(name)")
    }

    @Test func anAssemblyNoByteCameToIsDroppedBySweep() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/idle")
        var first = try #require(Self.join(cache, key, 200...239))
        Self.send(&first, 200...239)
        first.end(succeeded: true)
        cache.expireSliceParts(now: 20)
        cache.expireSliceParts(now: 20 + SliceAssemblies.maxWait)
        #expect(cache.assemblies.count == 1)
        cache.expireSliceParts(now: 20 + SliceAssemblies.maxWait + 1)
        #expect(cache.assemblies.count == 0)
        // A first part starts the slice again.
        #expect(Self.join(cache, key, 200...239, now: 100) != nil)
    }

    /// A first part while the slice's assembly is under way joins it or stores nothing; once
    /// that assembly stalled, it starts a new one.
    @Test func aFirstPartReplacesOnlyAStalledAssembly() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        let key = Fixtures.key("/stalled")
        var first = try #require(Self.join(cache, key, 200...239))
        Self.send(&first, 200...239)
        first.end(succeeded: true)
        #expect(Self.join(cache, key, 200...219, now: 11) == nil)
        var again = try #require(Self.join(cache, key, 200...219, now: 11 + SliceAssemblies.maxWait + 1))
        Self.send(&again, 200...219)
        again.end(succeeded: true)
        var rest = try #require(Self.join(cache, key, 220...299, now: 80))
        Self.send(&rest, 220...299)
        rest.end(succeeded: true)
        #expect(Self.stored(fixture, key) == Array(Self.object[200...299]))
    }

    @Test func atMostSoManyAssemblies() throws {
        let fixture = try DiskFixture()
        let cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        for index in 0...SliceAssemblies.maxWaiting {
            var part = try #require(Self.join(cache, Fixtures.key("/waiting/\(index)"), 200...239, now: 10 + Double(index) / 10))
            Self.send(&part, 200...239)
            part.end(succeeded: true)
        }
        #expect(cache.assemblies.count == SliceAssemblies.maxWaiting)
        // The one whose last byte came longest ago went.
        #expect(Self.join(cache, Fixtures.key("/waiting/0"), 240...299, now: 20) == nil)
        #expect(Self.join(cache, Fixtures.key("/waiting/\(SliceAssemblies.maxWaiting)"), 240...299, now: 20) != nil)
    }
}
