import Foundation
import LarderHTTP
import LarderIO
import Logging
import Synchronization
import Testing

@testable import LarderCache

/// The cache's one face over a real memory tier and a real disk tier in a temporary directory.
@Suite(.timeLimit(.minutes(1))) final class TieredCacheTests {
    let directory = NSTemporaryDirectory() + "larder-tiered-" + UUID().uuidString
    let cache: TieredCache

    init() throws {
        let disk = try DiskCache(
            directory: directory, limits: .init(maxBytes: 1 << 30, maxObjectBytes: 1 << 30), logger: Logger(label: "test"))
        disk.start()
        for _ in 0..<10_000 where !disk.isIndexComplete { usleep(1000) }
        disk.drain()
        cache = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: disk)
    }

    deinit {
        cache.disk?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func diskHead(_ path: String) -> DiskEntryFormat.Head {
        DiskEntryFormat.Head(
            key: Fixtures.key(path).url, status: 200, reason: "OK", requestTime: 1000, responseTime: 1000, vary: [:],
            headers: ["Cache-Control": "max-age=60"])
    }

    /// Looks `path` up until it is not pending (a disk entry checked on the reader thread).
    private func lookUp(_ path: String, request: HTTPHeaders = [:]) -> TieredCache.Lookup {
        var result = cache.lookup(Fixtures.key(path), request: request)
        if case .pending(let name) = result {
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var checked: DiskCache.Verification?
            cache.verify(name, key: Fixtures.key(path)) { verification in
                checked = verification
                done.signal()
            }
            done.wait()
            result = cache.lookup(Fixtures.key(path), request: request, checked: checked)
        }
        return result
    }

    /// A 10-byte response of `path`'s variant `vary`, arrived at `time`, to store on disk.
    private static func variantStore(_ path: String, _ vary: [String: String], at time: Double, seed: UInt8) -> TieredCache.PendingStore {
        .init(
            response: Fixtures.response(path, bodySize: 10, headers: ["Cache-Control": "max-age=600"], responseTime: time, vary: vary),
            body: pattern(10, seed: seed),
            head: DiskEntryFormat.Head(
                key: Fixtures.key(path).url, status: 200, reason: "OK", requestTime: time, responseTime: time, vary: vary,
                headers: ["Cache-Control": "max-age=600"]))
    }

    /// RFC 9111 §4.1 (review 112's first finding): a disk hit's copy does not go to memory
    /// while the disk holds a more recent response for its key, which in memory it would
    /// shadow for every request both match (after a restart, memory holds neither).
    @Test func aDiskHitDoesNotShadowAMoreRecentVariantInMemory() {
        let path = "/shadow"
        let now = Clocks.wallSeconds()
        cache.storeOnDisk(
            [Self.variantStore(path, [:], at: now - 20, seed: 1), Self.variantStore(path, ["x-v": "b"], at: now - 10, seed: 2)],
            budgetNanos: 1_000_000)
        cache.disk?.drain()
        guard case .found(let plain, true) = lookUp(path, request: ["X-V": "a"]) else {
            Issue.record("no disk hit for the response without Vary")
            return
        }
        #expect(plain.varyValues.isEmpty)
        guard case .found(let varied, _) = lookUp(path, request: ["X-V": "b"]) else {
            Issue.record("no hit for the variant")
            return
        }
        #expect(varied.varyValues == ["x-v": "b"], "the more recent variant, not the older response promoted to memory")
        #expect(cache.memory.lookup(Fixtures.key(path))?.contains { $0.varyValues.isEmpty } != true)
    }

    /// Review 113's seventh finding: variants of one field (Accept-Encoding) never answer the
    /// same request, so a less recent one is still promoted into memory.
    @Test func aVariantOnOneFieldIsPromotedBesideMoreRecentOnes() {
        let path = "/encodings"
        let now = Clocks.wallSeconds()
        let stores = ["gzip", "br", "identity"].enumerated().map { index, coding in
            Self.variantStore(path, ["accept-encoding": coding], at: now - 30 + Double(index), seed: UInt8(index))
        }
        cache.storeOnDisk(stores, budgetNanos: 1_000_000)
        cache.disk?.drain()
        guard case .found(let gzip, true) = lookUp(path, request: ["Accept-Encoding": "gzip"]) else {
            Issue.record("no disk hit for the gzip variant")
            return
        }
        #expect(gzip.varyValues == ["accept-encoding": "gzip"])
        // A hit that went through the reader thread is promoted there, after it returns.
        var promoted = false
        for _ in 0..<2000 where !promoted {
            promoted = cache.memory.lookup(Fixtures.key(path))?.contains { $0.varyValues == ["accept-encoding": "gzip"] } == true
            if !promoted { usleep(1000) }
        }
        #expect(promoted)
    }

    /// Review 113's eighth finding: a more recent response stored on disk only (too large for
    /// memory) takes out of memory the older variants that would answer its requests first.
    @Test func aMoreRecentResponseStoredOnDiskOnlyTakesOverlappingVariantsOutOfMemory() throws {
        let path = "/disk-only"
        let key = Fixtures.key(path)
        let now = Clocks.wallSeconds()
        cache.memory.insert(Fixtures.response(path, bodySize: 10, responseTime: now - 20, vary: ["x-other": "a"]))
        cache.memory.insert(Fixtures.response(path, bodySize: 10, responseTime: now - 20, vary: ["x-var": "c"]))
        let head = DiskEntryFormat.Head(
            key: key.url, status: 200, reason: "OK", requestTime: now - 10, responseTime: now - 10, vary: ["x-var": "b"],
            headers: ["Cache-Control": "max-age=600"])
        let write = try #require(cache.beginDiskWrite(key: key, head: head, expectedLength: 5000))
        write.append(pattern(5000, seed: 9))
        write.finish(expectedLength: 5000)
        cache.disk?.drain()
        let kept = cache.memory.lookup(key)?.map(\.varyValues) ?? []
        #expect(kept == [["x-var": "c"]], "the variant a request for b may also match went; c's stays")
    }

    private func waitForMemory(_ path: String) -> Bool {
        for _ in 0..<2000 {
            if cache.memory.lookup(Fixtures.key(path)) != nil { return true }
            usleep(1000)
        }
        return false
    }

    /// Tiers over this suite's disk with a memory tier that takes 1.5 MB bodies, and such a body
    /// (`pattern(_, seed:)`) stored on disk under `path`: larger than what is read on the loop,
    /// so its disk hits are served from the file and promoted by a read on the reader thread.
    private func tiersWithLargeDiskEntry(
        _ path: String, seed: UInt8, memoryFiles: MemoryFileBudget = .shared
    ) -> (tiers: TieredCache, body: [UInt8]) {
        let tiers = TieredCache(
            memory: MemoryCache(limits: Fixtures.limits(bytes: 16 << 20, object: 4 << 20)), disk: cache.disk,
            memoryFiles: memoryFiles)
        let body = pattern(1_500_000, seed: seed)
        tiers.storeOnDisk(
            [.init(response: Fixtures.response(path, bodySize: body.count), body: body, head: diskHead(path))],
            budgetNanos: 1_000_000)
        tiers.disk?.drain()
        return (tiers, body)
    }

    /// `path` looked up in `tiers`, when that is a disk hit served from its file.
    private func diskHitFromFile(_ tiers: TieredCache, _ path: String) -> StoredResponse? {
        guard case .found(let found, true) = tiers.lookup(Fixtures.key(path), request: [:]), case .file = found.body else {
            return nil
        }
        return found
    }

    /// A large body stored on a miss stays the array it arrived in; its first hit sends that
    /// and has it moved to a memory file (on the reader thread), which the tier then holds and
    /// later hits find. A second hit before the move is done sends the array too and moves
    /// nothing more. A small body is never moved.
    @Test func aLargeBodyMovesToAMemoryFileOnItsFirstHit() throws {
        let budget = MemoryFileBudget(limit: 8)
        let tiers = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: cache.disk, memoryFiles: budget)
        let bytes = (0..<(MemoryFileBudget.smallestFileBody + 5)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let large = Fixtures.response("/large", body: .memory(bytes))
        tiers.insertInMemory(large)
        tiers.insertInMemory(Fixtures.response("/small", bodySize: MemoryFileBudget.smallestFileBody - 1))
        func hit(_ path: String) -> StoredResponse? {
            guard case .found(let stored, false) = tiers.lookup(Fixtures.key(path), request: [:]) else { return nil }
            return stored
        }
        // The reader thread is held until both hits are done: the move queues behind this.
        let gate = DispatchSemaphore(value: 0)
        tiers.disk?.reader.submit { gate.wait() }
        #expect(hit("/large") === large, "the first hit sends the array")
        #expect(hit("/large") === large, "so does a second one before the move")
        gate.signal()
        tiers.disk?.reader.drain()
        #expect(budget.filesMade == 1, "moved once")
        let held = try #require(tiers.memory.lookup(Fixtures.key("/large"))?.first)
        guard case .memoryFile(let file, let length) = held.body else {
            Issue.record("not moved: \(held.body)")
            return
        }
        #expect(length == bytes.count)
        #expect(try FileSystem.read(file.fd, at: 0, count: length + 1) == bytes, "exactly the body")
        #expect(hit("/large") === held)
        #expect(held.hits.load(ordering: .relaxed) == 3)
        _ = hit("/small")
        tiers.disk?.reader.drain()
        guard let small = hit("/small"), case .memory = small.body else {
            Issue.record("a small body moved")
            return
        }
        #expect(budget.filesMade == 1)
    }

    /// Without a disk tier the first hit moves the body itself; with no memory-file place left
    /// the body stays an array and the next hits are served from it.
    @Test func withoutADiskTierOrAPlaceLeftTheMoveIsInlineOrNone() throws {
        let bytes = [UInt8](repeating: 9, count: MemoryFileBudget.smallestFileBody)
        let budget = MemoryFileBudget(limit: 8)
        let memoryOnly = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: nil, memoryFiles: budget)
        memoryOnly.insertInMemory(Fixtures.response("/inline", body: .memory(bytes)))
        _ = memoryOnly.lookup(Fixtures.key("/inline"), request: [:])
        let moved = try #require(memoryOnly.memory.lookup(Fixtures.key("/inline"))?.first)
        guard case .memoryFile = moved.body else {
            Issue.record("not moved inline: \(moved.body)")
            return
        }
        #expect(budget.filesMade == 1 && moved.memoryBody == bytes)

        // A body of 1 MiB or more is not copied on the loop, even where its size is worth a file.
        let unbounded = MemoryFileBudget(limit: 8, fileSizes: MemoryFileBudget.fileSizes(retpolines: false))
        let large = [UInt8](repeating: 4, count: 1 << 20)
        let memoryOnlyLarge = TieredCache(
            memory: MemoryCache(limits: Fixtures.limits(bytes: 16 << 20, object: 4 << 20)), disk: nil, memoryFiles: unbounded)
        memoryOnlyLarge.insertInMemory(Fixtures.response("/large-inline", body: .memory(large)))
        for _ in 0..<2 { _ = memoryOnlyLarge.lookup(Fixtures.key("/large-inline"), request: [:]) }
        let kept = try #require(memoryOnlyLarge.memory.lookup(Fixtures.key("/large-inline"))?.first)
        guard case .memory = kept.body else {
            Issue.record("a 1 MiB body was moved inline: \(kept.body)")
            return
        }
        #expect(unbounded.filesMade == 0)

        let full = MemoryFileBudget(limit: 0)
        let noPlace = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: nil, memoryFiles: full)
        let array = Fixtures.response("/array", body: .memory(bytes))
        noPlace.insertInMemory(array)
        for _ in 0..<2 {
            guard case .found(let stored, false) = noPlace.lookup(Fixtures.key("/array"), request: [:]) else {
                Issue.record("no memory hit")
                return
            }
            #expect(stored === array)
        }
        #expect(full.filesMade == 0)
    }

    /// First hits on several threads at once (under ThreadSanitizer in `make test`): every one
    /// gets the whole body, one memory file is made, and the tier holds it.
    @Test func concurrentFirstHitsMoveTheBodyOnce() throws {
        let budget = MemoryFileBudget(limit: 8)
        let tiers = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: cache.disk, memoryFiles: budget)
        let bytes = (0..<(MemoryFileBudget.smallestFileBody * 2)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        tiers.insertInMemory(Fixtures.response("/shared", body: .memory(bytes)))
        let bodies = Locked<[[UInt8]?]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if case .found(let stored, false) = tiers.lookup(Fixtures.key("/shared"), request: [:]) {
                let body = stored.memoryBody
                bodies.withLock { $0.append(body) }
            }
        }
        tiers.disk?.reader.drain()
        #expect(bodies.withLock { $0 } == Array(repeating: bytes, count: 8))
        #expect(budget.filesMade == 1, "moved by one lookup only")
        #expect(budget.count == 1)
        let held = try #require(tiers.memory.lookup(Fixtures.key("/shared"))?.first)
        guard case .memoryFile = held.body else {
            Issue.record("not moved")
            return
        }
        #expect(held.memoryBody == bytes)
    }

    @Test func memoryFirstThenDiskAndADiskHitIsPromoted() throws {
        let inMemory = Fixtures.response("/m")
        cache.insertInMemory(inMemory)
        guard case .found(_, let fromDisk) = lookUp("/m") else {
            Issue.record("memory entry not found")
            return
        }
        #expect(!fromDisk)

        let onDisk = Fixtures.response("/d", bodySize: 2000)
        cache.storeOnDisk([.init(response: onDisk, body: [UInt8](repeating: 7, count: 2000), head: diskHead("/d"))], budgetNanos: 1_000_000)
        cache.disk?.drain()
        #expect(cache.memory.lookup(Fixtures.key("/d")) == nil)
        guard case .found(let found, true) = lookUp("/d") else {
            Issue.record("disk entry not found")
            return
        }
        #expect(found.bodyLength == 2000)
        #expect(waitForMemory("/d"), "a disk hit small enough for memory is promoted")
        guard case .found(_, false) = lookUp("/d") else {
            Issue.record("promoted entry not served from memory")
            return
        }

        guard case .miss(let varyMiss) = lookUp("/nothing") else {
            Issue.record("found something never stored")
            return
        }
        #expect(!varyMiss)
    }

    /// A disk hit of a record up to 1 MiB, checked on every read, is served from the array it
    /// was read into, checked on the loop or on the reader thread: a memory file made to send
    /// it once cost more than the send. Promoted, it stays that array in the memory tier until
    /// its first memory hit moves it.
    @Test func aCheckedDiskHitIsServedFromTheArrayItWasReadInto() throws {
        for (path, size) in [("/checked-on-loop", 40_000), ("/checked-on-reader", 100_000)] {
            let bytes = pattern(size, seed: 5)
            cache.storeOnDisk(
                [.init(response: Fixtures.response(path, bodySize: size), body: bytes, head: diskHead(path))], budgetNanos: 1_000_000)
            cache.disk?.drain()
            guard case .found(let found, true) = lookUp(path) else {
                Issue.record("\(path): no disk hit")
                continue
            }
            guard case .memory(let served) = found.body else {
                Issue.record("\(path): served from \(found.body), not the array checked")
                continue
            }
            #expect(served == bytes, "\(path)")
            #expect(waitForMemory(path), "\(path) promoted")
            let promoted = try #require(cache.memory.lookup(Fixtures.key(path))?.first)
            guard case .memory = promoted.body else {
                Issue.record("\(path): promoted as \(promoted.body)")
                continue
            }
        }
    }

    /// A disk entry over 1 MiB is served from its file and promoted by a read on the reader
    /// thread: the memory tier gets the array read and keeps it, since bodies past
    /// ``MemoryFileBudget/fileSizes`` are written from the array rather than sent from
    /// a memory file.
    @Test func aPromotedFileBodyOver1MiBStaysTheArrayItWasReadInto() throws {
        let budget = MemoryFileBudget(limit: 8)
        let (tiers, bytes) = tiersWithLargeDiskEntry("/large-file", seed: 9, memoryFiles: budget)
        #expect(diskHitFromFile(tiers, "/large-file") != nil, "not served from its disk file")
        tiers.disk?.reader.drain()
        let promoted = try #require(tiers.memory.lookup(Fixtures.key("/large-file"))?.first, "promoted")
        guard case .memory(let held) = promoted.body else {
            Issue.record("promoted as \(promoted.body)")
            return
        }
        #expect(held == bytes)
        for _ in 0..<2 {
            guard case .found(let hit, false) = tiers.lookup(Fixtures.key("/large-file"), request: [:]) else {
                Issue.record("no memory hit")
                return
            }
            #expect(hit === promoted)
            tiers.disk?.reader.drain()
        }
        let kept = try #require(tiers.memory.lookup(Fixtures.key("/large-file"))?.first)
        guard case .memory = kept.body else {
            Issue.record("moved on a memory hit: \(kept.body)")
            return
        }
        #expect(kept === promoted && budget.filesMade == 0)
    }

    /// Where the kernel's indirect calls are not retpolines (a budget whose sizes have no upper
    /// bound), the same body, promoted as its array, moves to a memory file on its first memory
    /// hit, which sends the array; the hits after it find the file, holding the same bytes.
    @Test func aPromotedFileBodyOver1MiBMovesToAMemoryFileWhereSendfileIsCheap() throws {
        let budget = MemoryFileBudget(limit: 8, fileSizes: MemoryFileBudget.fileSizes(retpolines: false))
        let (tiers, bytes) = tiersWithLargeDiskEntry("/large-moved", seed: 5, memoryFiles: budget)
        #expect(diskHitFromFile(tiers, "/large-moved") != nil, "not served from its disk file")
        tiers.disk?.reader.drain()
        let promoted = try #require(tiers.memory.lookup(Fixtures.key("/large-moved"))?.first, "promoted")
        guard case .memory = promoted.body else {
            Issue.record("promoted as \(promoted.body)")
            return
        }
        guard case .found(let first, false) = tiers.lookup(Fixtures.key("/large-moved"), request: [:]) else {
            Issue.record("no memory hit")
            return
        }
        #expect(first === promoted && first.memoryBody == bytes)
        tiers.disk?.reader.drain()
        #expect(budget.filesMade == 1 && budget.count == 1)
        guard case .found(let later, false) = tiers.lookup(Fixtures.key("/large-moved"), request: [:]),
            case .memoryFile(_, let length) = later.body
        else {
            Issue.record("the hit after the first did not find a memory file")
            return
        }
        #expect(length == bytes.count && later.memoryBody == bytes)
    }

    /// Disk hits that come before the first one's promotion has landed each ask for it; once
    /// that version is in memory, the later ones read nothing and replace nothing.
    @Test func aPromotionQueuedTwiceReadsTheEntryOnce() throws {
        let (tiers, bytes) = tiersWithLargeDiskEntry("/twice", seed: 4)
        let gate = DispatchSemaphore(value: 0)
        tiers.disk?.reader.submit { gate.wait() }
        // The reader runs, in order: the first hit's promotion, this probe (what that put in
        // memory), the second hit's promotion.
        let first = Locked<StoredResponse?>(nil)
        let memory = tiers.memory
        for hit in 0..<2 {
            #expect(diskHitFromFile(tiers, "/twice") != nil, "hit \(hit): not a disk hit from its file")
            if hit == 0 { tiers.disk?.reader.submit { first.withLock { $0 = memory.lookup(Fixtures.key("/twice"))?.first } } }
        }
        gate.signal()
        tiers.disk?.reader.drain()
        let promoted = try #require(first.withLock { $0 }, "promoted by the first read")
        #expect(tiers.memory.lookup(Fixtures.key("/twice"))?.first === promoted, "the second read replaced it")
        #expect(promoted.memoryBody == bytes)
    }

    /// The check is by version: a disk entry other than the variant memory holds by the time
    /// its read would start is still read, and replaces it.
    @Test func aPromotionReplacesAnotherVersionInMemory() throws {
        let (tiers, bytes) = tiersWithLargeDiskEntry("/version", seed: 6)
        let gate = DispatchSemaphore(value: 0)
        tiers.disk?.reader.submit { gate.wait() }
        let found = try #require(diskHitFromFile(tiers, "/version"), "not a disk hit from its file")
        let other = Fixtures.response("/version", bodySize: 10, responseTime: found.responseTime - 100)
        tiers.insertInMemory(other)
        gate.signal()
        tiers.disk?.reader.drain()
        let held = try #require(tiers.memory.lookup(Fixtures.key("/version"))?.first)
        #expect(held !== other, "the other version kept the promotion out")
        #expect(held.responseTime == found.responseTime && held.memoryBody == bytes)
    }

    /// A slice enters the memory tier only when its whole object, the length its Content-Range
    /// gives, is within `memory.max_object_bytes`: a large file's slices stay on disk.
    @Test func aSliceIsPromotedOnlyWhenItsWholeObjectFits() throws {
        let limit = 64 << 10
        let tiers = TieredCache(memory: MemoryCache(limits: Fixtures.limits(bytes: 1 << 20, object: limit)), disk: cache.disk)
        func slice(_ path: String, objectLength: Int?) -> StoredResponse {
            var headers: HTTPHeaders = ["Cache-Control": "max-age=60"]
            if let objectLength { headers.add("Content-Range", ContentRange(first: 0, last: 999, length: objectLength).fieldValue) }
            return StoredResponse(
                key: Fixtures.key(path).slice(0), status: 206, reason: "Partial Content", headers: headers,
                body: .memory(pattern(1000, seed: 3)), requestTime: 1000, responseTime: 1000, varyValues: [:],
                freshnessLifetime: 60, correctedInitialAge: 0)
        }
        tiers.promote(slice("/fits", objectLength: limit), stamp: nil)
        tiers.promote(slice("/too-large", objectLength: limit + 1), stamp: nil)
        tiers.promote(slice("/no-range", objectLength: nil), stamp: nil)
        tiers.promote(Fixtures.response("/whole", bodySize: 1000), stamp: nil)
        #expect(tiers.memory.lookup(Fixtures.key("/fits").slice(0)) != nil, "its object fits")
        #expect(tiers.memory.lookup(Fixtures.key("/too-large").slice(0)) == nil, "its object is over the limit")
        #expect(tiers.memory.lookup(Fixtures.key("/no-range").slice(0)) == nil, "no length to judge by")
        #expect(tiers.memory.lookup(Fixtures.key("/whole")) != nil)
    }

    /// Past the loop's budget, entries go to the writer thread; all of them land.
    @Test func storesBeyondTheBudgetGoToTheWriter() throws {
        let stores = (0..<20).map { index in
            TieredCache.PendingStore(
                response: Fixtures.response("/s\(index)", bodySize: 500), body: [UInt8](repeating: 1, count: 500),
                head: diskHead("/s\(index)"))
        }
        cache.storeOnDisk(stores, budgetNanos: 0)
        cache.disk?.drain()
        #expect(cache.disk?.statistics.entries == 20)
        for index in 0..<20 {
            guard case .found(_, true) = lookUp("/s\(index)") else {
                Issue.record("/s\(index) not on disk")
                continue
            }
        }
    }

    /// An older version's cache_first kept private and no-store answers on disk: after an
    /// upgrade they are dropped when looked up, never served (one user's answer to another).
    @Test func aPrivateOrNoStoreEntryAnOlderVersionKeptIsDroppedNotServed() throws {
        for (path, cacheControl) in [("/private", "private"), ("/no-store", "no-store, max-age=60"), ("/kept", "max-age=60")] {
            let headers: HTTPHeaders = ["Cache-Control": cacheControl]
            var head = diskHead(path)
            head.headers = headers
            cache.storeOnDisk(
                [
                    .init(
                        response: Fixtures.response(path, bodySize: 300, headers: headers), body: [UInt8](repeating: 7, count: 300),
                        head: head)
                ],
                budgetNanos: 1_000_000)
            cache.disk?.drain()
            let first = lookUp(path)
            cache.disk?.drain()
            if path == "/kept" {
                guard case .found = first else {
                    Issue.record("an entry that may be shared is served")
                    continue
                }
            } else {
                guard case .miss = first else {
                    Issue.record("\(cacheControl): served")
                    continue
                }
                #expect(!cache.holds(Fixtures.key(path)), "\(cacheControl): dropped")
            }
        }
    }

    @Test func refreshInvalidateAndPurgeReachBothTiers() throws {
        let stored = Fixtures.response("/p", bodySize: 300)
        cache.insertInMemory(stored)
        cache.storeOnDisk([.init(response: stored, body: [UInt8](repeating: 7, count: 300), head: diskHead("/p"))], budgetNanos: 1_000_000)
        cache.disk?.drain()
        let newer = Fixtures.response("/p", bodySize: 300, headers: ["Cache-Control": "max-age=600", "X-Refreshed": "1"], lifetime: 600)
        cache.refresh(newer, of: stored, promoting: false)
        cache.disk?.drain()
        #expect(cache.memory.lookup(Fixtures.key("/p"))?.first?.headers["X-Refreshed"] == "1")
        cache.memory.removeAll()
        guard case .found(let fromDisk, true) = lookUp("/p") else {
            Issue.record("refreshed entry gone from disk")
            return
        }
        #expect(fromDisk.headers["X-Refreshed"] == "1", "the disk copy carries the 304's fields")
        #expect(waitForMemory("/p"))  // the hit's promotion lands before the invalidation

        // The variant a request was served, as the exchange holds it (the promoted copy).
        let served = try #require(cache.memory.lookup(Fixtures.key("/p"))?.first)
        cache.invalidate(served)
        cache.disk?.drain()
        guard case .miss = lookUp("/p") else {
            Issue.record("invalidated entry still served")
            return
        }

        cache.insertInMemory(stored)
        cache.storeOnDisk([.init(response: stored, body: [UInt8](repeating: 7, count: 300), head: diskHead("/p"))], budgetNanos: 1_000_000)
        cache.disk?.drain()
        #expect(cache.purge(Fixtures.key("/p")))
        cache.disk?.drain()
        guard case .miss = lookUp("/p") else {
            Issue.record("purged entry still served")
            return
        }
        #expect(!cache.purge(Fixtures.key("/p")))
    }

    /// A refresh replaces the memory copy only while it holds the body validated: another
    /// fill's, stored since under the same strong ETag and length (an origin reusing one
    /// wrongly), keeps its own fields, and a refresh of that copy lands, then one of the refresh.
    @Test func aRefreshLeavesAnotherFillsBodyUnderTheSameValidatorAlone() throws {
        let headers: HTTPHeaders = ["Cache-Control": "max-age=60", "ETag": "\"v1\""]
        let first = Fixtures.response("/same", headers: headers, responseTime: 1000).withBody(.memory(pattern(300, seed: 1)))
        let other = Fixtures.response("/same", headers: headers, responseTime: 1100).withBody(.memory(pattern(300, seed: 2)))
        cache.insertInMemory(first)
        cache.insertInMemory(other)
        cache.refresh(first.freshened(by: ["X-Refresh": "1"], requestTime: 1199, responseTime: 1200), of: first, promoting: false)
        let held = try #require(cache.memory.lookup(Fixtures.key("/same"))?.first)
        #expect(held.headers["X-Refresh"] == nil && held.responseTime == 1100)
        #expect(held.memoryBody == pattern(300, seed: 2))

        let refreshed = other.freshened(by: ["X-Refresh": "2"], requestTime: 1299, responseTime: 1300)
        cache.refresh(refreshed, of: other, promoting: false)
        let again = refreshed.freshened(by: ["X-Refresh": "3"], requestTime: 1399, responseTime: 1400)
        cache.refresh(again, of: refreshed, promoting: false)
        let last = try #require(cache.memory.lookup(Fixtures.key("/same"))?.first)
        #expect(last.headers["X-Refresh"] == "3" && last.responseTime == 1400)
        #expect(last.memoryBody == pattern(300, seed: 2))
    }

    @Test func listNamesEachVariantOnceWithItsTiersSortedByURL() throws {
        let body = [UInt8](repeating: 7, count: 300)
        cache.insertInMemory(Fixtures.response("/pkg/a", bodySize: 300))
        for path in ["/pkg/b", "/pkg/c", "/other"] {
            cache.storeOnDisk(
                [.init(response: Fixtures.response(path, bodySize: 300), body: body, head: diskHead(path))], budgetNanos: 1_000_000)
        }
        cache.insertInMemory(Fixtures.response("/pkg/c", bodySize: 300))
        cache.disk?.drain()

        let prefix = Fixtures.key("/pkg/").url
        let listed = cache.list(prefix: prefix, limit: 10, now: 0)
        #expect(listed.map(\.key.url) == ["/pkg/a", "/pkg/b", "/pkg/c"].map { Fixtures.key($0).url })
        #expect(listed.map(\.inMemory) == [true, false, true])
        #expect(listed.map(\.onDisk) == [false, true, true])
        #expect(listed[0].bytes == 300 && listed[2].bytes == 300, "memory entries report their body")
        #expect(listed[1].bytes > 300, "a disk-only entry reports its bytes on disk, head included")

        #expect(cache.list(prefix: prefix, limit: 2, now: 0).map(\.key.url) == ["/pkg/a", "/pkg/b"].map { Fixtures.key($0).url })
        #expect(cache.list(prefix: Fixtures.key("/none").url, limit: 10, now: 0).isEmpty)
        #expect(cache.list(prefix: prefix, limit: 0, now: 0).isEmpty)
        #expect(cache.list(prefix: "", limit: 10, now: 0).count == 4)
    }

    /// The listing's age, remaining freshness and hits, from memory and from a disk head.
    @Test func listReportsAgeFreshnessAndHitsFromEitherTier() throws {
        cache.insertInMemory(Fixtures.response("/pkg/a", bodySize: 300))  // max-age 60, received at 1000
        cache.storeOnDisk(
            [
                .init(
                    response: Fixtures.response("/pkg/b", bodySize: 300), body: [UInt8](repeating: 7, count: 300), head: diskHead("/pkg/b"))
            ],
            budgetNanos: 1_000_000)
        cache.disk?.drain()
        for _ in 1...3 { _ = lookUp("/pkg/a") }
        let before = cache.list(prefix: Fixtures.key("/pkg/").url, limit: 10, now: 1010)
        #expect(before.map(\.hits) == [3, 0])
        #expect(before.map(\.age) == [10, 10], "age from the memory variant and from the disk head alike")
        #expect(before.map(\.ttl) == [50, 50])
        _ = lookUp("/pkg/b")
        let after = cache.list(prefix: Fixtures.key("/pkg/b").url, limit: 10, now: 1070)
        #expect(after.first?.hits == 1, "a disk hit counts")
        #expect(after.first?.ttl == -10, "stale by ten seconds")
    }

    /// Both tiers let go of their lock between spans of slots; a listing still sees every entry.
    @Test func listWalksPastOneSpanOfSlots() throws {
        let count = DiskCache.listSpan + 100
        let memory = MemoryCache(limits: Fixtures.limits(bytes: 1 << 30, entries: 2 * count))
        let body = [UInt8](repeating: 1, count: 10)
        let stores = (0..<count).map { index in
            memory.insert(Fixtures.response("/many/\(index)", bodySize: 10))
            return TieredCache.PendingStore(
                response: Fixtures.response("/many/\(index)", bodySize: 10), body: body, head: diskHead("/many/\(index)"))
        }
        cache.storeOnDisk(stores, budgetNanos: 10_000_000_000)
        cache.disk?.drain()
        let prefix = Fixtures.key("/many/").url
        #expect(memory.list(prefix: prefix, limit: 2 * count).count == count)
        #expect(cache.disk?.list(prefix: prefix, limit: 2 * count).count == count)
        #expect(cache.disk?.list(prefix: prefix, limit: count - 1).count == count - 1)
        let both = TieredCache(memory: memory, disk: cache.disk).list(prefix: prefix, limit: 2 * count, now: 0)
        #expect(both.count == count && both.allSatisfy { $0.inMemory && $0.onDisk })
    }

    /// A plan that stores but whose sink cannot open stores nothing, and the response the fill
    /// validated goes (the origin sent a new one); a sink that opens leaves it to be replaced,
    /// and a plan that keeps the stored response leaves it either way.
    @Test func aSinkThatCannotOpenOutdatesTheResponseItWasToReplace() {
        let headers: HTTPHeaders = ["Cache-Control": "max-age=60"]
        func plan(validating: StoredResponse, status: Int = 200, ownSelectors: Bool = false) -> StoragePlan {
            let request = ResponseAdmission.Request(
                method: .get, headers: [:], policy: .http, directives: .none, validating: validating, fallback: nil,
                staleIfErrorWindow: 3600, dedupAlways: false, maxMemoryObject: 1 << 20, negativeTTL: 30, sharedKey: false,
                holdsSuccess: false, ownSelectors: ownSelectors, contentAddressed: false)
            let answer = StoragePlan.Answer(
                head: ResponseHead(status: status, headers: headers), cacheControl: CacheControl(headers), contentLength: 10)
            return StoragePlan.decide(request, answer: answer, slicing: StoragePlan.Slicing(), disk: nil, now: 1000) { _ in true }
        }
        func open(_ plan: StoragePlan, _ path: String, replacing: StoredResponse) -> StoreSink {
            cache.open(
                plan, head: ResponseHead(status: 200, headers: headers), cacheControl: CacheControl(headers),
                entry: StoreSink.Entry(
                    key: Fixtures.key(path), url: nil, requestHeaders: [:], requestTime: 1000, responseTime: 1000, contentLength: 10),
                replacing: replacing)
        }
        let rows: [(name: String, sliceWithoutIndex: Bool, status: Int, stores: Bool, keeps: Bool)] = [
            ("a whole body opens: the old copy waits for the new one", false, 200, true, true),
            ("a slice without its index cannot open: the old copy goes", true, 200, false, false),
        ]
        for (index, row) in rows.enumerated() {
            let path = "/replaced-\(index)"
            let stored = Fixtures.response(path, bodySize: 10)
            cache.insertInMemory(stored)
            var planned = plan(validating: stored, status: row.status)
            #expect(planned.action == .whole, "\(row.name)")
            if row.sliceWithoutIndex { planned.action = .slice(ContentRange(first: 0, last: 9, length: 10)) }
            var sink = open(planned, path, replacing: stored)
            #expect(sink.stores == row.stores, "\(row.name)")
            #expect((cache.memory.lookup(Fixtures.key(path)) != nil) == row.keeps, "\(row.name)")
            sink.abort()
        }
        // A plan whose rules keep the stored response (a 412 to the client's own preconditions)
        // is not opened by the fill; opened anyway, a sink that stores nothing leaves it.
        let success = Fixtures.response("/kept", bodySize: 10)
        cache.insertInMemory(success)
        var kept = plan(validating: success, status: 412, ownSelectors: true)
        #expect(kept.admission.keepsStored)
        kept.action = .slice(ContentRange(first: 0, last: 9, length: 10))
        var sink = open(kept, "/kept", replacing: success)
        #expect(!sink.stores)
        #expect(cache.memory.lookup(Fixtures.key("/kept")) != nil)
        sink.abort()
    }
}
