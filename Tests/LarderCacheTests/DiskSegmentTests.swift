import Foundation
import LarderHTTP
import LarderIO
import Logging
import Synchronization
import Testing

@testable import LarderCache

/// Segment files: records appended back to back, one write per batch of inline stores.
@Suite(.timeLimit(.minutes(1))) struct DiskSegmentTests {
    // MARK: Batches of inline stores

    /// Pending stores of `count` bodies of `size` bytes, paths `/<prefix><n>`.
    private func batch(_ prefix: String, count: Int, size: Int) -> [TieredCache.PendingStore] {
        (0..<count).map { index in
            let (stored, head) = complete("/\(prefix)\(index)", body: pattern(size, seed: UInt8(index % 200)))
            return TieredCache.PendingStore(response: stored, body: stored.memoryBody ?? [], head: head)
        }
    }

    /// An epoll batch's misses go to disk in one write: even with no time budget left after the
    /// first write, the whole batch is stored, back to back in one segment, and read back, also
    /// after a restart.
    @Test func aBatchOfInlineStoresIsOneWrite() throws {
        let fixture = try DiskFixture()
        let stores = batch("b", count: 40, size: 1024)
        #expect(fixture.cache.storeInline(stores, budgetNanos: 0).isEmpty, "nothing left for the writer")
        let segments = fixture.segmentFiles()
        #expect(segments.count == 1)
        let recordBytes = fixture.cache.index.withLock { index in
            (0..<40).compactMap { index.lookup(Fixtures.key("/b\($0)")).first?.size }.reduce(0, +)
        }
        #expect(Int64(fileSize(segments[0])) == recordBytes, "the records and nothing else")
        for index in 0..<40 {
            #expect(fixture.read("/b\(index)") == pattern(1024, seed: UInt8(index)), "/b\(index)")
        }
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        for index in 0..<40 {
            #expect(read(reopened, "/b\(index)") == pattern(1024, seed: UInt8(index)), "/b\(index) after a restart")
        }
        reopened.stop()
    }

    /// A write holds at most `inlineChunkBytes`; once the budget is spent, the rest of the batch
    /// is handed back for the writer thread, and bodies over the inline limit are handed back
    /// untouched.
    @Test func aLargeBatchIsWrittenInChunksWithinItsBudget() throws {
        let fixture = try DiskFixture()
        let size = 60 << 10
        var stores = batch("c", count: 40, size: size)
        let (large, largeHead) = complete("/large", body: pattern(DiskCache.inlineLimit + 1))
        stores.insert(TieredCache.PendingStore(response: large, body: large.memoryBody ?? [], head: largeHead), at: 3)
        let left = fixture.cache.storeInline(stores, budgetNanos: 0)
        let leftPaths = Set(left.map(\.response.key.url))
        #expect(leftPaths.contains(Fixtures.key("/large").url))
        let written = 41 - left.count
        #expect(written >= 1 && written <= DiskCache.inlineChunkBytes / size, "one chunk: \(written) records")
        for index in 0..<40 {
            let path = "/c\(index)"
            let expected = leftPaths.contains(Fixtures.key(path).url) ? nil : pattern(size, seed: UInt8(index))
            #expect(fixture.read(path) == expected, "\(path)")
        }
        #expect(fixture.cache.storeInline(left, budgetNanos: .max).map(\.response.key.url) == [Fixtures.key("/large").url])
        for index in 0..<40 {
            #expect(fixture.read("/c\(index)") == pattern(size, seed: UInt8(index)), "/c\(index) with a budget")
        }
    }

    /// A batch fills a segment up to its limit as single appends do (a record goes in while
    /// the segment is under it), then goes on in a new one.
    @Test func aBatchGoesOnInANewSegmentAtTheSegmentLimit() throws {
        let maxBytes: Int64 = 16 << 20
        let fixture = try DiskFixture(maxBytes: maxBytes)
        let limit = DiskCache.segmentLimit(maxBytes: maxBytes)
        #expect(fixture.cache.storeInline(batch("s", count: 10, size: 60 << 10), budgetNanos: .max).isEmpty)
        let sizes = fixture.segmentFiles().map(fileSize)
        #expect(sizes.count == 2, "\(sizes)")
        #expect(Int64(sizes[0]) >= limit && Int64(sizes[0]) < limit + (62 << 10), "sealed just past the limit: \(sizes)")
        for index in 0..<10 {
            #expect(fixture.read("/s\(index)") == pattern(60 << 10, seed: UInt8(index)), "/s\(index)")
        }
    }

    /// A write found slow ends the batch there: the records after it are handed back, in
    /// order, for the writer thread, which stores them; until the back-off ends, later batches
    /// are handed back whole.
    @Test func aSlowWriteHandsTheRestOfItsBatchToTheWriter() throws {
        let fixture = try DiskFixture()
        fixture.cache.slowInlineWrite.store(0, ordering: .relaxed)  // every write counts as slow
        let size = 60 << 10
        let stores = batch("w", count: 40, size: size)
        let left = fixture.cache.storeInline(stores, budgetNanos: .max)
        let written = 40 - left.count
        #expect(written >= 1 && written <= DiskCache.inlineChunkBytes / size, "one write: \(written) records")
        #expect(left.map(\.response.key.url) == stores[written...].map(\.response.key.url), "the rest, in order")
        #expect(fixture.cache.storeInline(batch("x", count: 3, size: 100), budgetNanos: .max).count == 3, "backing off")
        for store in left {
            fixture.cache.store(store.response, body: store.body, head: store.head)
        }
        fixture.cache.drain()
        for index in 0..<40 {
            #expect(fixture.read("/w\(index)") == pattern(size, seed: UInt8(index)), "/w\(index)")
        }
    }

    /// A batch whose write fails part-way (the filesystem fills up) leaves no trace: the
    /// segment is cut back to the records before it, none of its records is indexed or handed
    /// on, the tier refuses writes, and what was stored before is still served, also after a
    /// restart.
    @Test func aBatchWhoseWriteFailsIsCutOffAndIndexesNothing() throws {
        guard let tmpfs = SmallTmpfs(bytes: 256 << 10, test: "aBatchWhoseWriteFailsIsCutOffAndIndexesNothing") else { return }
        let fixture = try DiskFixture(directory: tmpfs.path + "/cache")
        #expect(fixture.cache.storeInline(batch("ok", count: 4, size: 1024), budgetNanos: .max).isEmpty)
        let segment = try #require(fixture.segmentFiles().first)
        let before = fileSize(segment)
        let left = fixture.cache.storeInline(batch("full", count: 40, size: 8 << 10), budgetNanos: .max)
        #expect(left.isEmpty, "dropped, not handed to the writer: the tier refuses writes")
        let statistics = fixture.cache.statistics
        #expect(statistics.writeErrors == 1)
        #expect(statistics.degraded)
        #expect(statistics.entries == 4)
        #expect(fileSize(segment) == before, "cut back to the records before the batch")
        for index in 0..<40 {
            #expect(fixture.read("/full\(index)") == nil, "/full\(index)")
        }
        for index in 0..<4 {
            #expect(fixture.read("/ok\(index)") == pattern(1024, seed: UInt8(index)), "/ok\(index)")
        }
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        #expect(reopened.statistics.entries == 4)
        for index in 0..<4 {
            #expect(read(reopened, "/ok\(index)") == pattern(1024, seed: UInt8(index)), "/ok\(index) after a restart")
        }
        reopened.stop()
        withExtendedLifetime(tmpfs) {}
    }

    // MARK: Segment files

    @Test func segmentRecordsSurviveARestartWithTheirPurgesAndReplacements() throws {
        let fixture = try DiskFixture()
        storeInline(fixture, [("/keep", 1), ("/purged", 2), ("/replaced", 3)], size: 2000)
        let (newer, head) = complete("/replaced", body: pattern(3000, seed: 4))
        #expect(fixture.cache.storeInline(newer, head: head))
        #expect(fixture.cache.purge(Fixtures.key("/purged")))
        fixture.cache.drain()
        #expect(fixture.segmentFiles().count == 1, "small entries share a segment")
        #expect(fixture.entryFiles().count == 1, "and have no files of their own")
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(read(reopened, "/keep") == pattern(2000, seed: 1))
        #expect(read(reopened, "/purged") == nil, "a purge is kept in the segment")
        #expect(read(reopened, "/replaced") == pattern(3000, seed: 4), "the newer record wins")
        #expect(reopened.statistics.entries == 2)
        #expect(reopened.statistics.corruptions == 0)
        reopened.stop()
    }

    @Test func replacementCutShortByACrashKeepsTheNewerRecord() throws {
        let fixture = try DiskFixture()
        let (old, head) = complete("/r", body: pattern(3000, seed: 1))
        #expect(fixture.cache.storeInline(old, head: head))
        // The old record is freed on the writer thread; hold it there and take the directory
        // as a crash would leave it: both records live.
        let gate = fixture.holdWriter()
        let (new, _) = complete("/r", body: pattern(3000, seed: 2))
        #expect(fixture.cache.storeInline(new, head: head))
        let crashed = fixture.directory + "-crashed"
        try FileManager.default.copyItem(atPath: fixture.directory, toPath: crashed)
        defer { try? FileManager.default.removeItem(atPath: crashed) }
        gate.signal()
        let recovered = try DiskCache(directory: crashed, limits: fixture.cache.currentLimits, logger: Logger(label: "test"))
        recovered.start()
        waitForIndex(recovered)
        recovered.drain()
        #expect(read(recovered, "/r") == pattern(3000, seed: 2), "the later record wins")
        #expect(recovered.statistics.entries == 1)
        recovered.stop()
        let segment = crashed + "/v1/" + DiskSegments.relativePath(1)
        let text = String(decoding: try #require(FileManager.default.contents(atPath: segment)), as: UTF8.self)
        #expect(text.hasPrefix(DiskEntryFormat.freedMagic), "the scan marked the earlier record freed")
    }

    @Test func recordCutShortByACrashIsCutOffAndTheOthersKept() throws {
        let fixture = try DiskFixture()
        // Paths of one length: records of one length.
        storeInline(fixture, [("/rec1", 1), ("/rec2", 2), ("/torn", 3)], size: 5000)
        let segment = try #require(fixture.segmentFiles().first)
        let whole = fileSize(segment)
        let recordLength = whole / 3
        truncate(segment, off_t(whole - 2000))  // what a crash in the middle of the last append leaves
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(fileSize(segment) == 2 * recordLength, "cut at the end of the last whole record")
        #expect(read(reopened, "/rec1") == pattern(5000, seed: 1))
        #expect(read(reopened, "/rec2") == pattern(5000, seed: 2))
        #expect(read(reopened, "/torn") == nil)
        #expect(reopened.statistics.entries == 2)
        let (after, head) = complete("/after", body: pattern(100))
        #expect(reopened.storeInline(after, head: head))
        #expect(read(reopened, "/after") == pattern(100), "new records go to a new segment")
        reopened.stop()
    }

    @Test func damagedRecordIsDroppedAndItsNeighboursServed() throws {
        let fixture = try DiskFixture()
        storeInline(fixture, [("/a", 1), ("/b", 2), ("/c", 3)], size: 4000)
        try editFirstSegment(fixture) { bytes in bytes[bytes.count / 2] ^= 0x01 }  // inside /b's body
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        #expect(read(reopened, "/b") == nil, "a body that fails its checksum is never served")
        #expect(read(reopened, "/a") == pattern(4000, seed: 1))
        #expect(read(reopened, "/c") == pattern(4000, seed: 3))
        #expect(reopened.statistics.corruptions == 1)
        reopened.drain()
        let again = try DiskCache(directory: fixture.directory, limits: reopened.currentLimits, logger: Logger(label: "test"))
        reopened.stop()
        again.start()
        waitForIndex(again)
        #expect(again.statistics.entries == 2, "the damaged record stays dropped")
        #expect(read(again, "/c") == pattern(4000, seed: 3))
        again.stop()
    }

    /// A record of up to a page is read once: the read of its head takes in its body, and the
    /// read's length shows the record whole without asking the segment's size. The body is
    /// still checked: one flipped byte drops the record, and the record cut short is not read
    /// whole, so not served.
    @Test func aSmallRecordIsOneReadAndStillCheckedWhole() throws {
        let fixture = try DiskFixture()
        storeInline(fixture, [("/a", 1), ("/b", 2), ("/c", 3)], size: 500)
        func loaded(_ path: String) throws -> DiskCache.LoadedHead {
            let entry = try #require(fixture.cache.index.withLock { $0.lookup(Fixtures.key(path)) }.first)
            #expect(entry.size <= 4096, "a record of one page: \(entry.size) bytes")
            return try fixture.cache.loadHead(entry)
        }
        let first = try loaded("/a")
        #expect(first.readBody.map(Array.init) == pattern(500, seed: 1), "the body came with the head")
        #expect(try fixture.cache.readChecked(first).body == pattern(500, seed: 1))

        let segment = try editFirstSegment(fixture) { bytes in
            let record = bytes.count / 3
            bytes[record + record - 10] ^= 0x01  // inside /b's body, the last bytes of its record
        }
        #expect(throws: DiskEntryFormat.Problem.checksumMismatch) { try fixture.cache.readChecked(try loaded("/b")) }
        #expect(fixture.read("/b") == nil, "a body that fails its checksum is never served")
        #expect(fixture.read("/a") == pattern(500, seed: 1))

        truncate(segment, off_t(fileSize(segment) - 100))  // into /c's record
        #expect(fixture.read("/c") == nil, "a record cut short is never served")
        #expect(fixture.read("/a") == pattern(500, seed: 1))
        #expect(fixture.cache.statistics.corruptions == 2)
    }

    @Test func refreshRewritesARecordAndKeepsItsBody() throws {
        let fixture = try DiskFixture()
        storeInline(fixture, [("/r", 1)], size: 3000)
        let refreshed = Fixtures.response(
            "/r", headers: ["Cache-Control": "max-age=60", "ETag": "\"v2\""], responseTime: 2000)
        fixture.cache.refresh(refreshed, of: Fixtures.response("/r", responseTime: 101))
        fixture.cache.drain()
        guard case .hit(let stored) = fixture.cache.lookup(Fixtures.key("/r"), request: [:]) else {
            Issue.record("no hit after the refresh")
            return
        }
        #expect(stored.headers["ETag"] == "\"v2\"")
        #expect(stored.responseTime == 2000)
        #expect(fixture.read("/r") == pattern(3000, seed: 1), "the body is copied, not taken from the refresh")
        #expect(fixture.cache.statistics.entries == 1)
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        #expect(read(reopened, "/r") == pattern(3000, seed: 1))
        #expect(reopened.statistics.entries == 1, "the record the refresh replaced stays freed")
        guard case .hit(let after) = reopened.lookup(Fixtures.key("/r"), request: [:]) else {
            Issue.record("no hit after the restart")
            return
        }
        #expect(after.headers["ETag"] == "\"v2\"")
        reopened.stop()
    }

    /// Records an older Larder wrote (format 2: one checksum chain) are read and checked in
    /// their format, and a refresh over one keeps that format, since its body's checksum stays.
    @Test func formatTwoRecordsAreReadAndRefreshedInTheirFormat() throws {
        let fixture = try DiskFixture()
        for (path, seed) in [("/old", UInt8(1)), ("/damaged", 2)] {
            var (stored, head) = complete(path, body: pattern(3000, seed: seed))
            head.version = 2
            #expect(fixture.cache.storeInline(stored, head: head))
        }
        storeInline(fixture, [("/new", 3)], size: 3000)
        let segment = try editFirstSegment(fixture) { bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.components(separatedBy: "LARDER-ENTRY 2\n").count == 3, "two records of format 2")
            #expect(
                text.components(separatedBy: "LARDER-ENTRY \(DiskEntryFormat.version)\n").count == 2, "one of the current format")
            // A flipped byte in the second record's body, which only its checksum can catch.
            let second = try #require(bytes.range(of: Data("key http://example.org/damaged".utf8)))
            bytes[second.lowerBound + 400] ^= 0x01
        }
        #expect(fileSize(segment) > 9000)
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        #expect(read(reopened, "/old") == pattern(3000, seed: 1))
        #expect(read(reopened, "/new") == pattern(3000, seed: 3))
        #expect(read(reopened, "/damaged") == nil, "checked with format 2's checksum, and dropped")
        #expect(reopened.statistics.corruptions == 1)
        reopened.refresh(
            Fixtures.response("/old", headers: ["Cache-Control": "max-age=60", "ETag": "\"r\""], responseTime: 2000),
            of: Fixtures.response("/old", responseTime: 101))
        reopened.drain()
        let again = try DiskCache(directory: fixture.directory, limits: reopened.currentLimits, logger: Logger(label: "test"))
        reopened.stop()
        again.start()
        waitForIndex(again)
        #expect(read(again, "/old") == pattern(3000, seed: 1), "the refreshed record reads after a restart")
        guard case .hit(let refreshed) = again.lookup(Fixtures.key("/old"), request: [:]) else {
            Issue.record("no hit after the refresh and a restart")
            return
        }
        #expect(refreshed.headers["ETag"] == "\"r\"")
        #expect(again.statistics.corruptions == 0)
        again.stop()
    }

    @Test func recordWithAnUnreadableHeadIsDroppedAndTheSegmentReadOn() throws {
        let fixture = try DiskFixture()
        storeInline(fixture, [("/a", 1), ("/b", 2), ("/c", 3)], size: 1000)
        let segment = try editFirstSegment(fixture) { bytes in
            // Same length, so the preamble still says where the next record starts.
            let status = try #require(bytes.range(of: Data("key http://example.org/b\nstatus 200".utf8)))
            bytes.replaceSubrange(status.upperBound - 3..<status.upperBound, with: Data("2x0".utf8))
        }
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(read(reopened, "/b") == nil)
        #expect(read(reopened, "/a") == pattern(1000, seed: 1))
        #expect(read(reopened, "/c") == pattern(1000, seed: 3), "records after it are still found")
        #expect(reopened.statistics.corruptions == 1)
        let text = String(decoding: try #require(FileManager.default.contents(atPath: segment)), as: UTF8.self)
        #expect(text.contains(DiskEntryFormat.freedMagic + "\(DiskEntryFormat.version)\n"), "the record is marked freed")
        reopened.stop()
    }

    @Test func compactionKeepsSegmentsUnderTheLimitAndEntriesIntact() throws {
        // 1 MiB: 256 KiB segments. Rewriting a working set of 100 keys leaves dead records
        // behind; new keys push the total past the limit.
        let limit: Int64 = 1 << 20
        let fixture = try DiskFixture(maxBytes: limit)
        var latest: [String: UInt8] = [:]
        for round in 0..<12 {
            for index in 0..<100 {
                let path = index < 50 ? "/hot\(index)" : "/cold\(round)-\(index)"
                let seed = UInt8(truncatingIfNeeded: round * 7 + index)
                let (stored, head) = complete(path, body: pattern(1500 + index * 10, seed: seed))
                #expect(fixture.cache.storeInline(stored, head: head))
                latest[path] = seed
            }
            fixture.cache.drain()
            let onDisk = fixture.entryFiles().reduce(0) { $0 + fileSize($1) }
            #expect(onDisk <= Int(limit), "round \(round): \(onDisk) bytes on disk")
            #expect(Int64(onDisk) == fixture.cache.statistics.bytes, "the tier counts what is on disk")
        }
        #expect(fixture.cache.statistics.evictions > 0)
        for index in 0..<50 {
            let path = "/hot\(index)"
            #expect(fixture.read(path) == pattern(1500 + index * 10, seed: latest[path]!), "\(path) after compactions")
        }
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(reopened.statistics.entries == fixture.cache.statistics.entries)
        for index in 0..<50 {
            let path = "/hot\(index)"
            #expect(read(reopened, path) == pattern(1500 + index * 10, seed: latest[path]!), "\(path) after a restart")
        }
        reopened.stop()
    }
}
