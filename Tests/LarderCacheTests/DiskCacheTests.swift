import Foundation
import LarderHTTP
import LarderIO
import Logging
import Synchronization
import Testing

@testable import LarderCache

@Suite(.timeLimit(.minutes(1))) struct DiskCacheTests {
    @Test func storedEntryIsReadBackByteForByte() throws {
        let fixture = try DiskFixture()
        let body = pattern(300_000)
        #expect(fixture.store("/a", body: body))
        #expect(fixture.read("/a") == body)
        #expect(fixture.read("/b") == nil)
        #expect(fixture.cache.statistics.entries == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory + "/tmp").isEmpty)
    }

    @Test func entriesSurviveARestart() throws {
        let fixture = try DiskFixture()
        let small = pattern(50_000)
        let large = pattern(3 << 20, seed: 7)
        fixture.store("/a", body: small)
        fixture.store("/large", body: large)
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        // A small entry is read whole and checked on every lookup, and served from those bytes.
        guard let stored = hit(reopened, "/a") else {
            Issue.record("a small entry is checked and served")
            return
        }
        #expect(stored.isInMemory)
        #expect(stored.memoryBody == small)
        #expect(stored.headers["Content-Type"] == "application/octet-stream")
        // A large one is found (its file opened on the reader thread: the new process keeps
        // none open yet), its blocks checked as they are read.
        guard case .unverified = reopened.lookup(Fixtures.key("/large"), request: [:]) else {
            Issue.record("an entry file not kept open is opened on the reader thread, not the loop")
            return
        }
        guard let file = hit(reopened, "/large") else {
            Issue.record("a large entry is found, to be checked block by block")
            return
        }
        guard case .hit = reopened.lookup(Fixtures.key("/large"), request: [:]) else {
            Issue.record("then kept open: found on the loop")
            return
        }
        #expect(checkedBody(reopened, file) == large)
        #expect(file.isOnDisk)
        #expect(file.bodyLength == 3 << 20)
        reopened.stop()
    }

    /// Review 117 F3: an earlier version stored a reason or a folded field with a bare CR (or
    /// another control byte) as the origin sent it. Read back, such a head is unreadable: the
    /// entry is dropped, not replayed to clients. A sound entry beside them is served.
    @Test func aStoredHeadWithAControlByteIsNotServed() throws {
        let fixture = try DiskFixture()
        let spoiled: [(path: String, reason: String, field: String)] = [
            ("/reason", "OK\rContent-Length: 0\r\rEVIL", "x"), ("/field", "OK", "a\rContent-Length: 0"), ("/escape", "OK", "a\u{1b}]0;x"),
            ("/sound", "OK", "a b"),
        ]
        for entry in spoiled {
            let key = Fixtures.key(entry.path)
            let body = pattern(2000)
            let write = try #require(
                fixture.cache.beginWrite(
                    key: key,
                    head: DiskEntryFormat.Head(
                        key: key.url, status: 200, reason: entry.reason, requestTime: 100, responseTime: 101, vary: [:],
                        headers: ["Cache-Control": "max-age=60", "X-A": entry.field]),
                    expectedLength: body.count))
            write.append(body)
            write.finish(expectedLength: body.count)
            fixture.cache.drain()
        }
        let reopened = try fixture.reopen()
        defer { reopened.stop() }
        waitForIndex(reopened)
        reopened.drain()
        for entry in spoiled.dropLast() {
            #expect(read(reopened, entry.path) == nil, "\(entry.path)")
        }
        #expect(read(reopened, "/sound") == pattern(2000))
        #expect(reopened.statistics.corruptions == 3)
    }

    @Test func flippedByteIsDetectedAndTheEntryDeleted() throws {
        let fixture = try DiskFixture()
        fixture.store("/large", body: pattern(3 << 20))
        let file = try #require(fixture.entryFiles().first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[bytes.count - 100] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: file))
        let reopened = try fixture.reopen()
        guard let stored = hit(reopened, "/large") else {
            Issue.record("expected a hit, its blocks to be checked as they are read")
            return
        }
        #expect(checkedBody(reopened, stored) == nil, "a flipped byte never passes its block's check")
        reopened.drain()
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(reopened.statistics.corruptions == 1)
        if case .miss = reopened.lookup(Fixtures.key("/large"), request: [:]) {} else { Issue.record("corrupt entry still found") }
        reopened.stop()
    }

    /// Damage done while the daemon runs, to an entry this very process wrote: a small entry
    /// is checked on every read, so it is never served.
    @Test func flippedByteInAnEntryThisProcessWroteIsNotServed() throws {
        let fixture = try DiskFixture()
        fixture.store("/a", body: pattern(10_000))
        #expect(fixture.read("/a") == pattern(10_000))
        let file = try #require(fixture.entryFiles().first)
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.seek(toOffset: UInt64(fileSize(file) - 100))
        let original = try #require(try handle.read(upToCount: 1)).first!
        try handle.seek(toOffset: UInt64(fileSize(file) - 100))
        handle.write(Data([original ^ 0x01]))
        try handle.close()
        #expect(fixture.read("/a") == nil)
        fixture.cache.drain()
        #expect(fixture.cache.statistics.corruptions == 1)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// The head is covered too: a flipped byte in a stored ETag is caught on any read.
    @Test func flippedByteInTheStoredHeadIsNotServed() throws {
        let fixture = try DiskFixture()
        fixture.store("/a", body: pattern(3 << 20))
        let file = try #require(fixture.entryFiles().first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        let text = String(decoding: bytes.prefix(2000), as: UTF8.self)
        let field = try #require(text.range(of: "application/octet-stream"))
        bytes[text.utf8.distance(from: text.startIndex, to: field.lowerBound)] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: file))
        #expect(fixture.read("/a") == nil, "the running process trusts no head")
        fixture.cache.drain()
        #expect(fixture.cache.statistics.corruptions == 1)
    }

    @Test func truncatedFileIsDetectedAtLookup() throws {
        let fixture = try DiskFixture()
        fixture.store("/a", body: pattern(10_000))
        let file = try #require(fixture.entryFiles().first)
        truncate(file, 5000)
        #expect(fixture.read("/a") == nil)
        fixture.cache.drain()
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(fixture.cache.statistics.corruptions == 1)
    }

    /// A file cut short after its size was taken, inside a head longer than the first read
    /// (4 KiB), is found truncated by the head's second read: no slice past what was read.
    @Test func aHeadCutShortAfterItsFileWasMeasuredIsTruncatedNotATrap() throws {
        let fixture = try DiskFixture()
        let key = Fixtures.key("/long-head")
        let write = try #require(
            fixture.cache.beginWrite(
                key: key,
                head: DiskEntryFormat.Head(
                    key: key.url, status: 200, reason: "OK", requestTime: 100, responseTime: 101, vary: [:],
                    headers: ["Cache-Control": "max-age=60", "X-Long": String(repeating: "a", count: 6000)]),
                expectedLength: 100))
        write.append(pattern(100))
        write.finish(expectedLength: 100)
        fixture.cache.drain()
        let path = try #require(fixture.entryFiles().first)
        let measured = Int64(fileSize(path))
        #expect(measured > 6000)
        let file = try OpenFile.open(path)
        truncate(path, 5000)  // past the first read, inside the head
        #expect(throws: DiskEntryFormat.Problem.truncated(expected: measured - 100, actual: 5000)) {
            try fixture.cache.loadRecord(file, at: 0, length: measured, inSegment: false)
        }
    }

    @Test func unknownFormatVersionIsDropped() throws {
        let fixture = try DiskFixture()
        fixture.store("/a", body: pattern(100))
        let file = try #require(fixture.entryFiles().first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[13] = UInt8(ascii: "9")  // "LARDER-ENTRY 9"
        try bytes.write(to: URL(fileURLWithPath: file))
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(!FileManager.default.fileExists(atPath: file))
        reopened.stop()
    }

    @Test func abortedWriteLeavesNothingBehind() throws {
        let fixture = try DiskFixture()
        let key = Fixtures.key("/a")
        let write = try #require(
            fixture.cache.beginWrite(
                key: key,
                head: .init(key: key.url, status: 200, reason: "OK", requestTime: 1, responseTime: 1, vary: [:], headers: [:]),
                expectedLength: nil))
        write.append(pattern(1000))
        write.abort()
        fixture.cache.drain()
        #expect(fixture.entryFiles().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory + "/tmp").isEmpty)
    }

    @Test func shortBodyIsNeverVisible() throws {
        let fixture = try DiskFixture()
        let key = Fixtures.key("/a")
        let write = try #require(
            fixture.cache.beginWrite(
                key: key,
                head: .init(key: key.url, status: 200, reason: "OK", requestTime: 1, responseTime: 1, vary: [:], headers: [:]),
                expectedLength: nil))
        write.append(pattern(1000))
        write.finish(expectedLength: 2000)
        fixture.cache.drain()
        #expect(fixture.entryFiles().isEmpty)
        #expect(fixture.read("/a") == nil)
    }

    @Test func objectsOverTheLimitAreNotStored() throws {
        let fixture = try DiskFixture(maxObjectBytes: 10_000)
        #expect(!fixture.store("/big", body: pattern(20_000)))
        #expect(fixture.entryFiles().isEmpty)
        #expect(fixture.cache.statistics.writeErrors == 0, "a size limit is not a disk fault")
    }

    /// Review 88 F1: a response the memory tier took but this tier cannot (over
    /// `max_object_bytes`) takes the variant's older entry with it, so it cannot answer again
    /// after a restart; an entry that arrived later stays, and so does another variant.
    @Test func aNewerResponseTooLargeForTheTierTakesTheOlderEntryWithIt() throws {
        let fixture = try DiskFixture(maxObjectBytes: 10_000)
        func stored(_ path: String, size: Int, at responseTime: Double, vary: [String: String] = [:])
            -> (StoredResponse, DiskEntryFormat.Head)
        {
            let response = Fixtures.response(path, responseTime: responseTime, vary: vary).withBody(.memory(pattern(size)))
            let head = DiskEntryFormat.Head(
                key: response.key.url, status: 200, reason: "OK", requestTime: responseTime, responseTime: responseTime,
                vary: vary, headers: response.headers)
            return (response, head)
        }
        for (path, at) in [("/older", 1000.0), ("/later", 3000)] {
            let (small, head) = stored(path, size: 100, at: at)
            #expect(fixture.cache.storeInline(small, head: head))
        }
        let gzip = ["accept-encoding": "gzip"]
        let (variant, variantHead) = stored("/older", size: 100, at: 1000, vary: gzip)
        #expect(fixture.cache.storeInline(variant, head: variantHead))
        for path in ["/older", "/later"] {
            let (large, head) = stored(path, size: 20_000, at: 2000)
            fixture.cache.store(large, head: head)
        }
        fixture.cache.drain()
        #expect(hit(fixture.cache, "/older") == nil, "the older entry went")
        #expect(read(fixture.cache, "/older", request: ["Accept-Encoding": "gzip"]) == pattern(100), "another variant stays")
        #expect(read(fixture.cache, "/later") == pattern(100), "an entry that arrived later stays")
        let reopened = try fixture.reopen()
        defer { reopened.stop() }
        waitForIndex(reopened)
        #expect(hit(reopened, "/older") == nil)
        #expect(reopened.statistics.entries == 2)
    }

    /// The same before the start-up scan has reached the older entry (a file stored before
    /// this process began): it goes too, and the scan finds nothing to index.
    @Test func aNewerResponseTooLargeForTheTierTakesAnUnscannedOlderFileWithIt() throws {
        let fixture = try DiskFixture(maxObjectBytes: 100_000)
        #expect(fixture.store("/older", body: pattern(70_000)))
        #expect(fixture.entryFiles().count == 1, "an entry in its own file")
        let reopened = try fixture.reopen(scanning: false)
        defer { reopened.stop() }
        #expect(!reopened.isIndexComplete)
        let large = Fixtures.response("/older", responseTime: 2000).withBody(.memory(pattern(200_000)))
        reopened.store(
            large,
            head: DiskEntryFormat.Head(
                key: large.key.url, status: 200, reason: "OK", requestTime: 2000, responseTime: 2000, vary: [:],
                headers: large.headers))
        reopened.drain()
        #expect(fixture.entryFiles().isEmpty)
        reopened.start()
        waitForIndex(reopened)
        #expect(hit(reopened, "/older") == nil)
        #expect(reopened.statistics.entries == 0)
    }

    @Test func evictionKeepsTotalSizeUnderTheLimit() throws {
        let fixture = try DiskFixture(maxBytes: 500_000)
        var generator = SystemRandomNumberGenerator()
        for index in 0..<60 {
            fixture.store("/\(index)", body: pattern(Int.random(in: 1_000...60_000, using: &generator)))
            let total = fixture.entryFiles().reduce(Int64(0)) { sum, path in
                sum + ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? 0)
            }
            #expect(total <= 500_000)
            #expect(total == fixture.cache.statistics.bytes)
        }
        #expect(fixture.cache.statistics.evictions > 0)
        #expect(fixture.read("/59") != nil, "the newest entry stays")
    }

    @Test func evictionSparesRecentlyUsedEntries() throws {
        let fixture = try DiskFixture(maxBytes: 100_000)
        fixture.store("/old", body: pattern(30_000))
        fixture.store("/used", body: pattern(30_000))
        _ = fixture.read("/old")  // now more recent than /used
        fixture.store("/new", body: pattern(50_000))
        #expect(fixture.read("/old") != nil)
        #expect(fixture.read("/used") == nil)
    }

    @Test func evictedFileStaysReadableForAnOpenReader() throws {
        // Over verifyEveryReadMax, so hits are served from the file itself.
        let fixture = try DiskFixture(maxBytes: 6_000_000)
        let body = pattern(4_000_000)
        fixture.store("/a", body: body)
        guard case .hit(let stored) = fixture.cache.lookup(Fixtures.key("/a"), request: [:]),
            case .file(let file, let offset, let length, _) = stored.body
        else {
            Issue.record("no hit")
            return
        }
        fixture.store("/b", body: pattern(4_000_000))  // evicts /a
        #expect(fixture.read("/a") == nil)
        #expect(try FileSystem.read(file.fd, at: offset, count: Int(length)) == body)
    }

    @Test func variantsAreStoredSideBySide() throws {
        let fixture = try DiskFixture()
        fixture.store("/v", body: pattern(100, seed: 1), vary: ["accept-encoding": "gzip"])
        fixture.store("/v", body: pattern(100, seed: 2), vary: ["accept-encoding": ""])
        #expect(fixture.read("/v", request: ["Accept-Encoding": "gzip"]) == pattern(100, seed: 1))
        #expect(fixture.read("/v", request: [:]) == pattern(100, seed: 2))
        #expect(fixture.read("/v", request: ["Accept-Encoding": "br"]) == nil)
    }

    /// RFC 9111 §4.1: of two stored responses that both match a request (one without Vary,
    /// one that varies), the most recent is served, whichever was stored first, before and
    /// after a restart (the start-up scan indexes entries in another order).
    @Test func theMostRecentMatchingResponseIsServed() throws {
        let fixture = try DiskFixture()
        let gzip = ["accept-encoding": "gzip"]
        fixture.store("/plain-first", body: pattern(100, seed: 1), responseTime: 200)
        fixture.store("/plain-first", body: pattern(100, seed: 2), vary: gzip, responseTime: 300)
        fixture.store("/varied-first", body: pattern(100, seed: 3), vary: gzip, responseTime: 200)
        fixture.store("/varied-first", body: pattern(100, seed: 4), responseTime: 300)
        func check(_ cache: DiskCache) {
            #expect(read(cache, "/plain-first", request: ["Accept-Encoding": "gzip"]) == pattern(100, seed: 2))
            #expect(read(cache, "/plain-first", request: [:]) == pattern(100, seed: 1), "the varied one does not match")
            #expect(read(cache, "/varied-first", request: ["Accept-Encoding": "gzip"]) == pattern(100, seed: 4))
        }
        check(fixture.cache)
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        check(reopened)
        reopened.stop()
    }

    /// A response stamped after now (stored before the wall clock stepped back) is the least
    /// recent of those that match, not the most recent until the clock catches up.
    @Test func aResponseFromTheFutureIsTheLeastRecent() throws {
        let fixture = try DiskFixture()
        let now = Clocks.wallSeconds()
        fixture.store("/clock", body: pattern(100, seed: 1), responseTime: now + 3600)
        fixture.store("/clock", body: pattern(100, seed: 2), vary: ["accept-encoding": "gzip"], responseTime: now - 10)
        #expect(read(fixture.cache, "/clock", request: ["Accept-Encoding": "gzip"]) == pattern(100, seed: 2))
    }

    @Test func purgeAndRemoveAllEmptyTheTier() throws {
        let fixture = try DiskFixture()
        fixture.store("/a", body: pattern(100))
        fixture.store("/b", body: pattern(100))
        #expect(fixture.cache.purge(Fixtures.key("/a")))
        #expect(!fixture.cache.purge(Fixtures.key("/a")))
        fixture.cache.drain()
        #expect(fixture.read("/a") == nil)
        #expect(fixture.entryFiles().count == 1)
        storeInline(fixture, [("/record", 1)], size: 300)
        fixture.cache.removeAll()
        fixture.cache.drain()
        #expect(fixture.read("/b") == nil)
        #expect(fixture.read("/record") == nil, "records go with the segments")
        #expect(fixture.entryFiles().isEmpty)
        #expect(fixture.store("/c", body: pattern(10)), "the tier keeps working after a clear")
        #expect(fixture.read("/c") == pattern(10))
        let (stored, head) = complete("/d", body: pattern(20))
        #expect(fixture.cache.storeInline(stored, head: head), "inline stores go to the new v1/ too")
        #expect(fixture.read("/d") == pattern(20))
        #expect(fixture.entryFiles().count == 2)
    }

    @Test func leftoverTemporaryFilesAreRemovedAtStart() throws {
        let fixture = try DiskFixture()
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: fixture.directory + "/tmp/stale.tmp"))
        let reopened = try fixture.reopen()
        reopened.drain()
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory + "/tmp").isEmpty)
        reopened.stop()
    }

    // MARK: Stores on the calling thread (an event loop's)

    @Test func inlineStoreIsOnDiskWhenItReturns() throws {
        let fixture = try DiskFixture()
        let (stored, head) = complete("/inline", body: pattern(3000))
        #expect(fixture.cache.storeInline(stored, head: head))
        // No drain: the file was written and indexed on this thread.
        #expect(fixture.entryFiles().count == 1)
        #expect(fixture.read("/inline") == pattern(3000))
        let (large, largeHead) = complete("/large", body: pattern(DiskCache.inlineLimit + 1))
        #expect(!fixture.cache.storeInline(large, head: largeHead), "bodies over the inline limit go to the writer")
    }

    /// A response whose body the memory tier keeps in a memory file is stored from that file
    /// when the caller has no array at hand, with the stored response's serialized fields.
    @Test func memoryFileBodyIsStoredFromItsFile() throws {
        let fixture = try DiskFixture()
        let body = pattern(MemoryFileBudget.smallestFileBody + 100)
        let (stored, head) = complete("/memory-file", body: body)
        let inFile = stored.withBody(.inMemory(body, budget: MemoryFileBudget(limit: 1)))
        guard case .memoryFile = inFile.body else {
            Issue.record("expected a memory file")
            return
        }
        #expect(fixture.cache.storeInline(inFile, head: head))
        #expect(fixture.read("/memory-file") == body)
        let text = String(decoding: try #require(FileManager.default.contents(atPath: fixture.entryFiles()[0])), as: UTF8.self)
        #expect(text.contains("\n\nCache-Control: max-age=60\r\n"), "the fields, once, after the head section")
    }

    @Test func inlineStoreIsNotUndoneByAQueuedPurge() throws {
        let fixture = try DiskFixture()
        let (old, head) = complete("/p", body: pattern(500, seed: 1))
        #expect(fixture.cache.storeInline(old, head: head))
        let gate = fixture.holdWriter()
        // Queued behind the blocked job: the purge frees the record stored above.
        #expect(fixture.cache.purge(Fixtures.key("/p")))
        let (new, _) = complete("/p", body: pattern(500, seed: 2))
        #expect(fixture.cache.storeInline(new, head: head), "a queued purge does not hold inline stores back")
        gate.signal()
        fixture.cache.drain()
        #expect(fixture.read("/p") == pattern(500, seed: 2), "the purge freed the old record only")
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        #expect(read(reopened, "/p") == pattern(500, seed: 2), "and so it stays after a restart")
        #expect(reopened.statistics.entries == 1)
        reopened.stop()
    }

    @Test func entryDeletedBehindTheIndexIsAMissNotACorruption() throws {
        let fixture = try DiskFixture()
        fixture.store("/gone", body: pattern(100))  // streamed: a file of its own
        for file in fixture.entryFiles() { try FileManager.default.removeItem(atPath: file) }
        #expect(fixture.read("/gone") == nil)
        let statistics = fixture.cache.statistics
        #expect(statistics.corruptions == 0)
        #expect(statistics.entries == 0)
    }

    @Test func replacingAnEntryLeavesTheOldBytesToItsReaders() throws {
        let fixture = try DiskFixture()
        let (first, head) = complete("/r", body: pattern(4000, seed: 1))
        #expect(fixture.cache.storeInline(first, head: head))
        guard case .hit(let old) = fixture.cache.lookup(Fixtures.key("/r"), request: [:]) else {
            Issue.record("no hit for the first version")
            return
        }
        let (second, _) = complete("/r", body: pattern(4000, seed: 9))
        #expect(fixture.cache.storeInline(second, head: head))
        #expect(body(of: old) == pattern(4000, seed: 1), "a reader of the old version keeps its bytes")
        #expect(fixture.read("/r") == pattern(4000, seed: 9))
        #expect(fixture.entryFiles().count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory + "/tmp").isEmpty)
    }

    @Test func entryCutShortByACrashIsDeletedAtStart() throws {
        let fixture = try DiskFixture()
        let (stored, head) = complete("/torn", body: pattern(6000))
        #expect(fixture.cache.storeInline(stored, head: head))
        let file = try #require(fixture.entryFiles().first)
        truncate(file, 3000)  // what a crash in the middle of the in-place write leaves
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(reopened.statistics.entries == 0)
        reopened.stop()
    }

    /// Files in the entry tree that are not named as Larder names entries (another name, or an
    /// entry's name under the wrong directory) are neither indexed nor deleted nor counted.
    @Test func filesThatAreNotEntriesAreLeftAloneAtStart() throws {
        let fixture = try DiskFixture()
        let body = pattern(300_000)  // read and checked on the reader thread: found unverified
        fixture.store("/a", body: body)
        let file = try #require(fixture.entryFiles().first)
        let name = URL(fileURLWithPath: file).lastPathComponent
        let directory = URL(fileURLWithPath: file).deletingLastPathComponent().path
        let strangers = [
            directory + "/not-an-entry", directory + "/" + name.uppercased(), directory + "/" + name + ".copy",
            fixture.directory + "/v1/ff/ff/" + name,
        ]
        try FileManager.default.createDirectory(atPath: fixture.directory + "/v1/ff/ff", withIntermediateDirectories: true)
        for stranger in strangers { try FileManager.default.copyItem(atPath: file, toPath: stranger) }
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        reopened.drain()
        #expect(reopened.statistics.entries == 1)
        #expect(reopened.statistics.corruptions == 0)
        for stranger in strangers { #expect(FileManager.default.fileExists(atPath: stranger), "\(stranger) kept") }
        guard case .unverified(let found) = reopened.lookup(Fixtures.key("/a"), request: [:]) else {
            Issue.record("the entry itself is indexed")
            return
        }
        #expect(found.description == name)
        reopened.stop()
    }

    @Test func slowInlineStoreSendsLaterStoresToTheWriter() throws {
        let fixture = try DiskFixture()
        fixture.cache.slowInlineWrite.store(0, ordering: .relaxed)  // every store counts as slow
        let (first, firstHead) = complete("/slow1", body: pattern(100))
        #expect(fixture.cache.storeInline(first, head: firstHead), "written: the disk is not known to be slow yet")
        #expect(fixture.read("/slow1") == pattern(100))
        fixture.cache.slowInlineWrite.store(10_000_000, ordering: .relaxed)
        let (second, secondHead) = complete("/slow2", body: pattern(200))
        #expect(!fixture.cache.storeInline(second, head: secondHead), "declined for the back-off after a slow store")
        fixture.cache.store(second, head: secondHead)
        fixture.cache.drain()
        #expect(fixture.read("/slow2") == pattern(200), "the writer thread still stores")
    }

    @Test func inlineWriteErrorDegradesTheTierAndLeavesNothing() throws {
        let fixture = try DiskFixture()
        let (stored, head) = complete("/blocked", body: pattern(100))
        // A file where the segment directory belongs: creating the first segment fails.
        let blocker = fixture.directory + "/v1/" + DiskSegments.directoryName
        #expect(FileManager.default.createFile(atPath: blocker, contents: Data([1])))
        #expect(fixture.cache.storeInline(stored, head: head), "handled on the loop, though it failed")
        let statistics = fixture.cache.statistics
        #expect(statistics.writeErrors == 1)
        #expect(statistics.degraded)
        #expect(statistics.entries == 0)
        #expect(fixture.entryFiles() == [blocker])
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory + "/tmp").isEmpty)
        let (next, nextHead) = complete("/next", body: pattern(10))
        #expect(!fixture.cache.storeInline(next, head: nextHead), "no writes while degraded")
    }

    @Test func verifyingAnEntryDeletedMeanwhileIsNotACorruption() throws {
        let fixture = try DiskFixture()
        // Too large to check on the loop, small enough to read and check whole.
        fixture.store("/v", body: pattern(500_000))
        let reopened = try fixture.reopen()
        waitForIndex(reopened)
        guard case .unverified(let name) = reopened.lookup(Fixtures.key("/v"), request: [:]) else {
            Issue.record("expected an unverified entry")
            return
        }
        for file in fixture.entryFiles() { try FileManager.default.removeItem(atPath: file) }
        let done = DispatchSemaphore(value: 0)
        reopened.verify(name, key: Fixtures.key("/v")) { verification in
            if case .sound = verification { Issue.record("a deleted entry passed") }
            done.signal()
        }
        done.wait()
        #expect(reopened.statistics.corruptions == 0)
        #expect(reopened.statistics.entries == 0)
        reopened.stop()
    }

    /// A refresh lands over the body it validated and no other (RFC 9111 §4.3.4: a 304 updates
    /// the response it was asked about). The body's arrival is what tells: a refresh keeps it
    /// (a `body-time` line, read back after a restart), so a refresh of that refresh lands too,
    /// while another fill's body, stored since under the same strong ETag and length (an origin
    /// reusing one wrongly), does not take the fields validated for the first. A record and an
    /// entry in its own file.
    @Test(arguments: [3000, DiskCache.inlineLimit + 1000])
    func aRefreshLandsOverTheBodyItValidatedAndNoOther(size: Int) throws {
        let fixture = try DiskFixture()
        let headers: HTTPHeaders = ["Cache-Control": "max-age=60", "ETag": "\"v1\""]
        func fill(_ cache: DiskCache, seed: UInt8, at responseTime: Double) {
            let key = Fixtures.key("/r")
            let head = DiskEntryFormat.Head(
                key: key.url, status: 200, reason: "OK", requestTime: responseTime - 1, responseTime: responseTime, vary: [:],
                headers: headers)
            if size <= DiskCache.inlineLimit {
                let stored = Fixtures.response("/r", headers: headers, responseTime: responseTime).withBody(
                    .memory(pattern(size, seed: seed)))
                #expect(cache.storeInline(stored, head: head))
            } else {
                let write = cache.beginWrite(key: key, head: head, expectedLength: size)
                #expect(write != nil)
                write?.append(pattern(size, seed: seed))
                write?.finish(expectedLength: size)
            }
            cache.drain()
        }
        func refresh(_ cache: DiskCache, _ original: StoredResponse, by field: String, at responseTime: Double) {
            cache.refresh(
                original.freshened(by: ["X-Refresh": field], requestTime: responseTime - 1, responseTime: responseTime), of: original)
            cache.drain()
        }
        fill(fixture.cache, seed: 1, at: 1000)
        let first = try #require(hit(fixture.cache, "/r"))
        refresh(fixture.cache, first, by: "1", at: 2000)
        let reopened = try fixture.reopen()
        defer { reopened.stop() }
        waitForIndex(reopened)
        let refreshed = try #require(hit(reopened, "/r"))
        #expect(refreshed.headers["X-Refresh"] == "1" && refreshed.responseTime == 2000)
        #expect(refreshed.bodyTime == 1000, "the body's arrival survives the restart")

        refresh(reopened, refreshed, by: "2", at: 3000)
        let again = try #require(hit(reopened, "/r"))
        #expect(again.headers["X-Refresh"] == "2" && again.responseTime == 3000 && again.bodyTime == 1000)
        #expect(read(reopened, "/r") == pattern(size, seed: 1))

        // Another fill's body under the same validator: a late refresh of the first is refused.
        fill(reopened, seed: 2, at: 4000)
        refresh(reopened, again, by: "3", at: 5000)
        let other = try #require(hit(reopened, "/r"))
        #expect(other.headers["X-Refresh"] == nil && other.responseTime == 4000 && other.bodyTime == 4000)
        #expect(read(reopened, "/r") == pattern(size, seed: 2))
    }

    /// Review 87 F1: another fill of the variant, stored by a loop as a record while the writer
    /// copies a refresh's body (an honest origin whose content changed, a request that did not
    /// join the validation), stays: the refresh is not indexed over it, its own copy is freed,
    /// and the memory tier is told to drop its copy of the refresh. A record and a file.
    @Test(arguments: [3000, DiskCache.inlineLimit + 1000])
    func aFillStoredWhileARefreshIsWrittenStays(size: Int) throws {
        let fixture = try DiskFixture()
        let key = Fixtures.key("/r")
        func head(at responseTime: Double, etag: String) -> DiskEntryFormat.Head {
            DiskEntryFormat.Head(
                key: key.url, status: 200, reason: "OK", requestTime: responseTime - 1, responseTime: responseTime, vary: [:],
                headers: ["Cache-Control": "max-age=60", "ETag": etag])
        }
        if size <= DiskCache.inlineLimit {
            let first = head(at: 1000, etag: "\"v1\"")
            let stored = Fixtures.response("/r", headers: first.headers, responseTime: 1000).withBody(.memory(pattern(size, seed: 1)))
            #expect(fixture.cache.storeInline(stored, head: first))
        } else {
            let write = fixture.cache.beginWrite(key: key, head: head(at: 1000, etag: "\"v1\""), expectedLength: size)
            #expect(write != nil)
            write?.append(pattern(size, seed: 1))
            write?.finish(expectedLength: size)
            fixture.cache.drain()
        }
        let first = try #require(hit(fixture.cache, "/r"))
        let refused = Mutex<[Double]>([])
        fixture.cache.whenSuperseded.withLock { $0 = { entry in refused.withLock { $0.append(entry.responseTime) } } }
        let reached = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        fixture.cache.refreshWillLand.withLock {
            $0 = {
                reached.signal()
                proceed.wait()
            }
        }
        fixture.cache.refresh(
            first.freshened(by: ["X-Refresh": "1"], requestTime: 2999, responseTime: 3000), of: first)
        reached.wait()
        // Its head arrived before the 304 did, its body while the refresh was being written.
        let otherHead = head(at: 2000, etag: "\"v2\"")
        let other = Fixtures.response("/r", headers: otherHead.headers, responseTime: 2000).withBody(.memory(pattern(100, seed: 2)))
        #expect(fixture.cache.storeInline(other, head: otherHead))
        proceed.signal()
        fixture.cache.drain()

        let held = try #require(hit(fixture.cache, "/r"))
        #expect(held.headers["X-Refresh"] == nil && held.headers["ETag"] == "\"v2\"" && held.responseTime == 2000)
        #expect(fixture.read("/r") == pattern(100, seed: 2))
        #expect(refused.withLock { $0 } == [3000], "the memory tier is told")
        #expect(fixture.entryFiles().count == fixture.segmentFiles().count, "no entry file is left")
        let reopened = try fixture.reopen()
        defer { reopened.stop() }
        waitForIndex(reopened)
        #expect(read(reopened, "/r") == pattern(100, seed: 2))
        #expect(hit(reopened, "/r")?.headers["X-Refresh"] == nil)
        #expect(reopened.statistics.entries == 1)
    }
}

/// Times in an entry's head: written to the microsecond, read back by `Double(_:)`.
@Suite struct DiskEntryTimeTests {
    @Test(arguments: [
        (0.0, "0.000000"), (1000.5, "1000.500000"), (1_764_139_200.123456, "1764139200.123456"),
        (1_764_139_200.9999996, "1764139201.000000"), (7.000001, "7.000001"),
        // Outside 0..<1e12 (a clock far off): written as Double.description, still read back.
        (-1.5, "-1.5"), (2e12, "2000000000000.0"),
        // The longest spelling: the entry head reserves 24 bytes a time (the writer traps past them).
        (-2.2250738585072014e-308, "-2.2250738585072014e-308"),
    ])
    func secondsAreWrittenToTheMicrosecond(_ seconds: Double, _ text: String) throws {
        let bytes = [UInt8](unsafeUninitializedCapacity: 24) { buffer, count in
            var writer = ByteWriter(buffer)
            DiskEntryFormat.appendSeconds(seconds, to: &writer)
            count = writer.count
        }
        #expect(String(decoding: bytes, as: UTF8.self) == text)
        let back = try #require(Double(text))
        #expect(abs(back - seconds) <= 0.000001)
    }

    /// Every time in range is spelled as its whole seconds in decimal, a dot and six digits of
    /// microseconds: the digits written eight at a time are the ones division gives.
    @Test func secondsMatchTheirDecimalSpelling() {
        var random = SplitMix64(seed: 60)
        var times: [Double] = [1e8 - 0.0000001, 1e8, 99_999_999.999999, 100_000_000.000001, 999_999_999_999.5, 12_345_678.9]
        for _ in 0..<5000 { times.append(Double(random.next() % 1_000_000_000_000_000) / 1_000_000) }
        for _ in 0..<5000 { times.append(Double(random.next() % 10_000_000_000_000_000) / 1_000_000) }
        times += [999_999_999.999999, 1_000_000_000, 9_999_999_999.999999, 10_000_000_000.5, 0.000001, 99_999_999.5]
        for _ in 0..<1000 { times.append(Double(random.next() % 2_000_000_000)) }
        for seconds in times {
            let bytes = [UInt8](unsafeUninitializedCapacity: 24) { buffer, count in
                var writer = ByteWriter(buffer)
                DiskEntryFormat.appendSeconds(seconds, to: &writer)
                count = writer.count
            }
            let micros = Int((seconds * 1_000_000).rounded())
            let fraction = String(micros % 1_000_000)
            let expected = "\(micros / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
            #expect(String(decoding: bytes, as: UTF8.self) == expected)
        }
    }

    /// The preamble's lengths: zero-padded to their field, a value wider than it traps.
    @Test(arguments: [
        (0, 1, "0"), (7, 1, "7"), (0, 10, "0000000000"), (312, 10, "0000000312"), (9_999_999_999, 10, "9999999999"),
        (1 << 50, 20, "00001125899906842624"), (1024, 20, "00000000000000001024"),
    ])
    func lengthsAreZeroPadded(_ value: Int, _ width: Int, _ text: String) {
        let bytes = [UInt8](unsafeUninitializedCapacity: width) { buffer, count in
            DiskEntryFormat.writeZeroPadded(value, into: buffer)
            count = width
        }
        #expect(String(decoding: bytes, as: UTF8.self) == text)
    }
}

/// Texts from the wire in an entry's head: obs-text (RFC 9112 §4: a reason phrase may carry
/// bytes over 0x7F) is read as one scalar a byte, written back as that byte and read again
/// as the same text, so a response served from disk carries the bytes its origin sent.
@Suite struct DiskEntryTextTests {
    @Test func aLatin1ReasonAndVaryValueSurviveTheDiskHead() throws {
        let reason = ([0x43, 0x61, 0x66, 0xE9, 0x20, 0x4F, 0x4B] as [UInt8]).withUnsafeBytes { ASCII.string($0) }  // "Caf\xE9 OK"
        let language = ([0x66, 0x72, 0x2D, 0xE9] as [UInt8]).withUnsafeBytes { ASCII.string($0) }
        let head = DiskEntryFormat.Head(
            key: "http://example.com/a", status: 200, reason: reason, requestTime: 100, responseTime: 101,
            vary: ["accept-language": language], headers: ["Cache-Control": "max-age=60"])
        let bytes = DiskEntryFormat.entryHead(head, bodyLength: 0, bodyChecksum: 0)
        let back = try DiskEntryFormat.decodeHead(bytes[DiskEntryFormat.preambleLength...], bodyLength: 0, bodyChecksum: 0)
        #expect(back.reason == reason)
        #expect(back.vary == ["accept-language": language])
        #expect(back.key == head.key && back.headers == head.headers)
    }

    /// The fields section must be whole `Name: value\r\n` lines: a line without a name and
    /// ": ", or a last line without its CRLF, makes the head unreadable rather than dropped.
    @Test func aFieldSectionWithAMalformedLineIsUnreadable() throws {
        let head = DiskEntryFormat.Head(
            key: "http://example.com/a", status: 200, reason: "OK", requestTime: 100, responseTime: 101, vary: [:],
            headers: ["Cache-Control": "max-age=60", "ETag": "\"e\""])
        let section = Array(DiskEntryFormat.entryHead(head, bodyLength: 0, bodyChecksum: 0)[DiskEntryFormat.preambleLength...])
        #expect(try DiskEntryFormat.decodeHead(section[...], bodyLength: 0, bodyChecksum: 0).headers == head.headers)
        for damaged in [section + Array("Broken\r\n".utf8), section + Array("X-Tail: 1".utf8), Array(section.dropLast(2))] {
            #expect(throws: DiskEntryFormat.Problem.self) {
                try DiskEntryFormat.decodeHead(damaged[...], bodyLength: 0, bodyChecksum: 0)
            }
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct DiskScrubberTests {
    @Test func pausesKeepTheAverageAtTheRate() {
        #expect(DiskScrubber.pause(afterChecking: 16 << 20, rate: 16 << 20) == .seconds(1))
        #expect(DiskScrubber.pause(afterChecking: 1 << 20, rate: 4 << 20) == .milliseconds(250))
        #expect(DiskScrubber.pause(afterChecking: 1, rate: 0) == DiskScrubber.idleNap)
    }

    @Test func aScrubPassDropsOnlyDamagedLargeEntries() throws {
        let fixture = try DiskFixture()
        fixture.store("/sound", body: pattern(2 << 20, seed: 1))
        fixture.store("/damaged", body: pattern(2 << 20, seed: 2))
        fixture.store("/small", body: pattern(10_000, seed: 3))
        let damaged = try #require(
            fixture.entryFiles().first { file in
                (try? Data(contentsOf: URL(fileURLWithPath: file)).range(of: Data("/damaged".utf8))) != nil
            })
        var bytes = try Data(contentsOf: URL(fileURLWithPath: damaged))
        bytes[bytes.count - 10] ^= 0x80
        try bytes.write(to: URL(fileURLWithPath: damaged))
        fixture.cache.scrubber.rate.store(1 << 30, ordering: .relaxed)
        for _ in 0..<500 where fixture.cache.scrubber.checkedEntries.load() + fixture.cache.scrubber.droppedEntries.load() < 2 {
            usleep(10_000)
        }
        fixture.cache.drain()
        #expect(fixture.cache.scrubber.droppedEntries.load() == 1)
        #expect(fixture.cache.scrubber.checkedEntries.load() == 1, "the small entry is not the scrub's")
        #expect(!FileManager.default.fileExists(atPath: damaged))
        #expect(fixture.read("/sound") == pattern(2 << 20, seed: 1))
        #expect(fixture.cache.statistics.corruptions == 1)
    }
}
