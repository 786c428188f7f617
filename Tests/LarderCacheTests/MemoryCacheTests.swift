import LarderHTTP
import LarderIO
import Testing

@testable import LarderCache

@Suite(.timeLimit(.minutes(1))) struct MemoryCacheTests {
    /// `memory.max_bytes` counts what an entry holds: its fields once (the serialized head sent
    /// on hits), each array as the allocator rounds it.
    @Test func anEntryCountsWhatItHolds() {
        let value = String(repeating: "v", count: 500)
        let plain = Fixtures.response("/a", bodySize: 1000)
        var more = HTTPHeaders([("Cache-Control", "max-age=60")])
        more.add("X-Extra", value)
        let larger = Fixtures.response("/a", bodySize: 1000, headers: more)
        let line = "X-Extra: \(value)\r\n".utf8.count
        #expect(larger.memoryCost - plain.memoryCost >= line, "the field is held in the head")
        #expect(larger.memoryCost - plain.memoryCost < 2 * line, "and only there")
        // mimalloc's classes: 64 bytes apart up to 1 KiB, then four per power of two.
        #expect(StoredResponse.allocated(100) == 192)
        #expect(StoredResponse.allocated(1024) == 1280)
        #expect(StoredResponse.allocated(8192) == 10240)
        #expect(StoredResponse.allocated(20000) == 20480)
        #expect(plain.memoryCost >= StoredResponse.allocated(1000) + StoredResponse.memoryOverhead)
    }

    /// A disk entry promoted into memory is the same response with its body in memory: head,
    /// validators, directives, lifetimes and variant as they were, the hit count from zero.
    @Test func aPromotedEntryKeepsEveryPartButItsBody() {
        let headers: HTTPHeaders = [
            "Cache-Control": "max-age=60, must-revalidate", "ETag": "\"e1\"", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT",
        ]
        let original = Fixtures.response("/p", bodySize: 10, headers: headers, lifetime: 60, age: 5, vary: ["accept": "a"])
        _ = original.hits.add(3, ordering: .relaxed)
        let promoted = original.withBody(.memory([1, 2, 3]))
        #expect(promoted.memoryBody == [1, 2, 3])
        #expect(promoted.headBytes == original.headBytes && promoted.wireFields == original.wireFields)
        #expect(promoted.headers == headers)
        #expect(promoted.etag == "\"e1\"" && promoted.lastModified == 784_111_777)
        #expect(promoted.directives == original.directives && promoted.directives.mustRevalidate)
        #expect(promoted.key == original.key && promoted.status == 200 && promoted.reason == "OK")
        #expect(promoted.varyValues == ["accept": "a"])
        #expect(promoted.freshnessLifetime == 60 && promoted.correctedInitialAge == 5)
        #expect(promoted.requestTime == original.requestTime && promoted.responseTime == original.responseTime)
        #expect(promoted.hits.load(ordering: .relaxed) == 0)
    }

    /// An entry lives for hours: its fields are kept once, in its serialized head, in a block of
    /// its size (not in the room a parser reserves for a typical head), and read back from it.
    @Test func anEntryKeepsItsFieldsOnceInABlockOfTheirSize() throws {
        var parser = ResponseHeadParser()
        var parsed: ResponseHead?
        let lines = [
            "HTTP/1.1 200 OK", "Server: nginx", "Date: Sun, 06 Nov 1994 08:49:37 GMT", "Content-Type: text/plain",
            "Content-Length: 100", "Last-Modified: Sun, 06 Nov 1994 08:00:00 GMT", "ETag: \"6745e3a1-400\"",
            "Cache-Control: max-age=3600", "Link: <https://example.com/static/site.css>; rel=preload; as=style",
            "Accept-Ranges: bytes", "",
        ]
        for line in lines {
            let bytes = Array((line + "\r\n").utf8)
            if case .final(let head) = try bytes.withUnsafeBytes({ try parser.feed($0) }) { parsed = head }
        }
        let head = try #require(parsed)
        #expect(head.headers.wire.capacity > head.headers.wire.count + 200, "the parser reserves room for more fields")
        let stored = Fixtures.response("/a", headers: head.headers)
        #expect(stored.headers == head.headers)
        #expect(stored.etag == "\"6745e3a1-400\"" && stored.lastModified == 784_108_800)
        // What the allocator rounds a block to (mimalloc: 64 bytes apart at these sizes), no more.
        #expect(stored.headBytes.capacity < stored.headBytes.count + 64)
        #expect(stored.headBytes == StoredResponse.serializeHead(status: 200, reason: "OK", headers: head.headers).bytes)
    }

    /// A stored head is the status line, the stored fields and `Via`, as a response head is
    /// serialized for the wire, whatever the status's width and the reason's bytes.
    @Test(arguments: [(200, "OK"), (404, "Not Found"), (299, ""), (99, "Odd"), (1000, "Wide"), (7, "X"), (200, "Caf\u{e9}")])
    func aStoredHeadIsTheWireForm(_ status: Int, _ reason: String) {
        let headers: HTTPHeaders = ["Content-Type": "text/plain", "Cache-Control": "max-age=60"]
        let prepared = StoredResponse.serializeHead(status: status, reason: reason, headers: headers)
        var expected: [UInt8] = []
        HeadSerializer.appendStatusLine(status, reason, to: &expected)
        let start = expected.count
        HeadSerializer.appendFields(headers, to: &expected)
        #expect(prepared.fields == start..<expected.count)
        expected += StoredResponse.viaLine
        #expect(prepared.bytes == expected)
    }

    /// A body in a memory file costs whole pages: one byte over a page takes another.
    @Test func aMemoryFileBodyCountsWholePages() throws {
        let budget = MemoryFileBudget(limit: 2)
        func cost(_ length: Int) throws -> Int {
            let file = try #require(OpenFile.anonymous(copying: [UInt8](repeating: 1, count: length), budget: budget))
            return Fixtures.response("/f", body: .memoryFile(file, length: length)).memoryCost
        }
        let onePage = 9 * 4096
        #expect(try cost(onePage + 1) - cost(onePage) == 4096)
        #expect(try cost(onePage) >= onePage + StoredResponse.memoryOverhead)
    }

    /// `memory.max_object_bytes` bounds the body as received: a body of exactly the limit, kept
    /// as the array it arrived in (which the allocator rounds up by as much as a quarter), is
    /// taken, and so is a small body behind a head of several KiB.
    @Test func theObjectLimitCountsTheBodyNotItsRounding() {
        let cache = MemoryCache(limits: Fixtures.limits(bytes: 1 << 20, entries: 100, object: 65_536))
        let atTheLimit = Fixtures.response("/limit", bodySize: 65_536)
        #expect(atTheLimit.memoryCost > 65_536 + 4096, "the array's block is larger than the limit allows")
        #expect(cache.insert(atTheLimit))
        #expect(!cache.insert(Fixtures.response("/over", bodySize: 65_537)))
        var headers: HTTPHeaders = ["Cache-Control": "max-age=60"]
        headers.add("Content-Security-Policy", String(repeating: "a", count: 6000))
        #expect(cache.insert(Fixtures.response("/long-head", bodySize: 100, headers: headers)))
    }

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

    /// The limit is on the body: the room the entry's cost has above it (for its head) does not
    /// let a body a few KiB over the limit in.
    @Test func refusesABodyJustOverThePerObjectLimit() {
        let cache = MemoryCache(limits: Fixtures.limits(object: 1024))
        #expect(cache.insert(Fixtures.response("/at", bodySize: 1024)))
        #expect(!cache.insert(Fixtures.response("/over", bodySize: 3000)))
        #expect(cache.lookup(Fixtures.key("/over")) == nil)
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

    /// The arrival rule both tiers keep the later fill by, on a clock given: later wins, a tie
    /// does not, and one stamped after now gives way; the clock is read only for a later one.
    @Test func aLaterArrivalWinsUnlessItIsStampedAfterNow() {
        var reads = 0
        let now: () -> Double = {
            reads += 1
            return 100
        }
        #expect(StoredResponse.arrival(50, isAfter: 40, now: now))
        #expect(StoredResponse.arrival(100, isAfter: 40, now: now))
        #expect(!StoredResponse.arrival(101, isAfter: 40, now: now), "stamped after now")
        #expect(reads == 3)
        #expect(!StoredResponse.arrival(40, isAfter: 40, now: now))
        #expect(!StoredResponse.arrival(30, isAfter: 40, now: now))
        #expect(reads == 3)
    }

    /// Which of two responses that match is the more recent (RFC 9111 §4.1), on a clock given:
    /// the later, a tie neither, and one stamped after now is less recent than any other; the
    /// clock is read only when the two differ.
    @Test func theMoreRecentOfTwoIsTheLaterUnlessStampedAfterNow() {
        var reads = 0
        let now: () -> Double = {
            reads += 1
            return 100
        }
        #expect(StoredResponse.isMoreRecent(50, than: 40, now: now))
        #expect(!StoredResponse.isMoreRecent(40, than: 50, now: now))
        #expect(StoredResponse.isMoreRecent(40, than: 101, now: now), "the other is stamped after now")
        #expect(!StoredResponse.isMoreRecent(101, than: 40, now: now), "stamped after now")
        #expect(StoredResponse.isMoreRecent(102, than: 101, now: now), "both after now: the later")
        #expect(reads == 5)
        #expect(!StoredResponse.isMoreRecent(40, than: 40, now: now))
        #expect(reads == 5)
    }

    /// Review 82 R82-1: of two fills of one variant that overlap, the one that began first may
    /// finish last. The response that arrived later stays; a removal for a version streamed to
    /// disk takes only its own variant, and only a copy that arrived no later.
    @Test func aResponseThatArrivedLaterIsNotReplacedByAnOlderOne() {
        let cache = MemoryCache(limits: Fixtures.limits())
        let now = Clocks.wallSeconds()
        let newer = Fixtures.response("/r", responseTime: now - 10)
        #expect(cache.insert(newer))
        #expect(!cache.insert(Fixtures.response("/r", responseTime: now - 20)))
        #expect(cache.lookup(Fixtures.key("/r"))?.first === newer)
        let newest = Fixtures.response("/r", responseTime: now - 5)
        #expect(cache.insert(newest))
        #expect(cache.lookup(Fixtures.key("/r"))?.map(\.responseTime) == [now - 5])
        // Stamped after now: stored before the wall clock stepped back, it gives way.
        #expect(cache.insert(Fixtures.response("/f", responseTime: now + 3600)))
        #expect(cache.insert(Fixtures.response("/f", responseTime: now - 1)))
        #expect(cache.lookup(Fixtures.key("/f"))?.map(\.responseTime) == [now - 1])
        let gzip = ["accept-encoding": "gzip"]
        let plain = ["accept-encoding": ""]
        cache.insert(Fixtures.response("/v", bodySize: 500, responseTime: now - 10, vary: gzip))
        cache.insert(Fixtures.response("/v", bodySize: 500, responseTime: now - 10, vary: plain))
        let bytes = cache.statistics.bytes
        cache.remove(Fixtures.key("/v"), variant: gzip, unlessArrivedAfter: now - 20)
        #expect(cache.lookup(Fixtures.key("/v"))?.count == 2, "the copy in memory arrived later")
        cache.remove(Fixtures.key("/v"), variant: gzip, unlessArrivedAfter: now - 1)
        #expect(cache.lookup(Fixtures.key("/v"))?.map(\.varyValues) == [plain], "the other variant stays")
        #expect(cache.statistics.bytes < bytes)
        cache.remove(Fixtures.key("/v"), variant: plain, unlessArrivedAfter: now)
        #expect(cache.lookup(Fixtures.key("/v")) == nil)
    }

    /// Review 64 F3: `Vary` on a field clients choose let one client store ~30,000 variants of
    /// a URL, each store and lookup walking them all under the tier's lock. The newest
    /// ``MemoryCache/maxVariants`` stay, on either tier.
    @Test func aKeyKeepsItsNewestVariantsOnly() {
        let cache = MemoryCache(limits: Fixtures.limits(bytes: 10 << 20, entries: 1000))
        var index = DiskIndex()
        let key = Fixtures.key("/many")
        let total = MemoryCache.maxVariants + 36
        var evicted: [[String: String]] = []
        for agent in 0..<total {
            let vary = ["user-agent": "agent \(agent)"]
            cache.insert(Fixtures.response("/many", bodySize: 10, vary: vary))
            let replaced = index.insert(
                DiskIndex.Entry(
                    key: key, vary: vary, name: DiskCache.entryName(key: key, vary: vary), size: 10, responseTime: 0, bodyTime: 0))
            if let replaced { evicted.append(replaced.vary) }
        }
        let kept = (cache.lookup(key) ?? []).map { $0.varyValues["user-agent"] ?? "" }
        #expect(kept.count == MemoryCache.maxVariants && kept.first == "agent \(total - 1)" && !kept.contains("agent 35"))
        #expect(index.lookup(key).count == DiskIndex.maxVariants && index.count == DiskIndex.maxVariants)
        #expect(evicted == (0..<36).map { ["user-agent": "agent \($0)"] }, "the oldest went, each returned for its file to go")
    }

    /// Review 112: after a restart the disk index lists a key's variants newest first; the cap
    /// still removes the least recent, not the first listed. Memory keeps the variants in the
    /// order their responses arrived, however they were stored.
    @Test func theCapRemovesTheLeastRecentVariantWhateverTheOrderOfTheList() {
        var index = DiskIndex()
        let key = Fixtures.key("/scanned")
        func entry(_ agent: Int) -> DiskIndex.Entry {
            let vary = ["user-agent": "agent \(agent)"]
            return DiskIndex.Entry(
                key: key, vary: vary, name: DiskCache.entryName(key: key, vary: vary), size: 10, responseTime: 1000 + Double(agent),
                bodyTime: 1000 + Double(agent))
        }
        // As the start-up scan indexes them: newest first, uncapped.
        for agent in (0..<DiskIndex.maxVariants).reversed() {
            let added = index.insertIfAbsent(entry(agent))
            #expect(added)
        }
        let replaced = index.insert(entry(DiskIndex.maxVariants))
        #expect(replaced?.vary == ["user-agent": "agent 0"], "the least recent went")
        let kept = index.lookup(key)
        #expect(kept.count == DiskIndex.maxVariants && kept.contains { $0.vary == ["user-agent": "agent \(DiskIndex.maxVariants - 1)"] })

        let cache = MemoryCache(limits: Fixtures.limits(bytes: 10 << 20, entries: 1000))
        cache.insert(Fixtures.response("/order", bodySize: 10, responseTime: 2000, vary: ["x-v": "b"]))
        cache.insert(Fixtures.response("/order", bodySize: 10, responseTime: 1000))
        #expect(cache.lookup(Fixtures.key("/order"))?.map(\.responseTime) == [2000, 1000], "the older one, stored last, comes second")
        // A full key refuses a variant older than all it keeps (it would be the one to go).
        for agent in 0..<MemoryCache.maxVariants {
            cache.insert(Fixtures.response("/full", bodySize: 10, responseTime: 3000 + Double(agent), vary: ["user-agent": "\(agent)"]))
        }
        #expect(!cache.insert(Fixtures.response("/full", bodySize: 10, responseTime: 2500, vary: ["user-agent": "old"])))
        #expect(cache.lookup(Fixtures.key("/full"))?.count == MemoryCache.maxVariants)
        #expect(cache.insert(Fixtures.response("/full", bodySize: 10, responseTime: 3500, vary: ["user-agent": "new"])))
        #expect(cache.lookup(Fixtures.key("/full"))?.contains { $0.varyValues["user-agent"] == "0" } == false, "the least recent went")
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

    /// The memory tier keeps a large body in an anonymous memory file (hits send it with
    /// sendfile), a small one in an array; both read back as the same bytes and cost the tier
    /// their length. A budget of its own: no other test can use up its places.
    @Test func largeBodiesAreKeptInAMemoryFile() throws {
        let budget = MemoryFileBudget(limit: 4)
        let large = (0..<MemoryFileBudget.smallestFileBody).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let small = Array(large.prefix(MemoryFileBudget.smallestFileBody - 1))
        let inFile = Fixtures.response("/large", body: .inMemory(large, budget: budget))
        let inArray = Fixtures.response("/small", body: .inMemory(small, budget: budget))
        guard case .memoryFile(let file, let length) = inFile.body else {
            Issue.record("a body of smallestFileBody bytes stayed in an array")
            return
        }
        guard case .memory = inArray.body else {
            Issue.record("a body under smallestFileBody went into a file")
            return
        }
        #expect(budget.count == 1)
        #expect(length == large.count)
        #expect(try FileSystem.read(file.fd, at: 0, count: length + 1) == large, "exactly the bytes, nothing more")
        #expect(inFile.memoryBody == large)
        #expect(inFile.isInMemory && !inFile.isOnDisk && inArray.isInMemory)
        #expect(inFile.bodyLength == large.count)
        #expect(inFile.memoryCost >= large.count && inArray.memoryCost >= small.count)
        let cache = MemoryCache(limits: Fixtures.limits())
        #expect(cache.insert(inFile))
        #expect(cache.lookup(Fixtures.key("/large"))?.first === inFile)
    }

    /// Past its budget a large body stays in an array, and a file released by its last
    /// response gives its place back.
    @Test func memoryFilesStayWithinTheirBudget() {
        let budget = MemoryFileBudget(limit: 1)
        let bytes = [UInt8](repeating: 1, count: MemoryFileBudget.smallestFileBody)
        var first: OpenFile? = OpenFile.anonymous(copying: bytes, budget: budget)
        #expect(first != nil)
        #expect(OpenFile.anonymous(copying: bytes, budget: budget) == nil, "over the limit")
        #expect(budget.count == 1, "a refused file takes no place")
        if case .memoryFile = StoredResponse.Body.inMemory(bytes, budget: budget) { Issue.record("over the limit, yet in a file") }
        first = nil
        #expect(budget.count == 0)
        #expect(OpenFile.anonymous(copying: bytes, budget: budget) != nil, "the released place is free again")
        budget.limit = 0
        #expect(OpenFile.anonymous(copying: bytes, budget: budget) == nil, "a limit of 0 turns memory files off")
        _ = first
    }
}
