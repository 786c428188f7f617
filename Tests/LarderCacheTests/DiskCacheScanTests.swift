import Foundation
import LarderHTTP
import LarderIO
import Logging
import Synchronization
import Testing

@testable import LarderCache

/// Lookups while the start-up scan runs: an entry it has not indexed yet is looked for by name
/// on the reader thread, never opened on a loop, and the scan and those lookups never undo a
/// removal or lose an entry to each other.
@Suite(.timeLimit(.minutes(1))) struct DiskCacheScanTests {
    /// While the start-up scan has not reached an entry, a lookup on a loop opens no file (a
    /// cold inode is a disk read every client of the loop would wait for): the name goes to
    /// the reader thread, which finds the entry and indexes it, or finds nothing; after that
    /// check the lookup is a miss, not another trip.
    @Test func anEntryTheScanHasNotReachedIsLookedForOnTheReaderThread() throws {
        let fixture = try DiskFixture()
        let body = pattern(100_000, seed: 5)
        fixture.store("/early", body: body)
        let early = Fixtures.key("/early")
        let foreignPath = fixture.cache.path(forName: DiskCache.entryName(key: Fixtures.key("/foreign"), vary: [:]))
        let reopened = try fixture.reopen(scanning: false)
        defer { reopened.stop() }
        #expect(!reopened.isIndexComplete)
        guard case .unverified(let name) = reopened.lookup(early, request: [:]) else {
            Issue.record("an entry the scan has not indexed is looked for on the reader thread, not opened on the loop")
            return
        }
        #expect(name == DiskCache.entryName(key: early, vary: [:]))
        guard case .sound(let stored?, _) = Self.check(reopened, name, early) else {
            Issue.record("the reader thread finds the entry under its name")
            return
        }
        #expect(stored.memoryBody == body)
        #expect(reopened.isIndexed(early), "indexed by the check, for the scan and later lookups")

        // Nothing under the name: the check says so, and the lookup after it is a miss.
        let never = Fixtures.key("/never")
        guard case .unverified(let absent) = reopened.lookup(never, request: [:]) else {
            Issue.record("an unindexed name is looked for on the reader thread")
            return
        }
        guard case .dropped = Self.check(reopened, absent, never) else {
            Issue.record("nothing is found under a name with no file")
            return
        }
        guard case .miss = reopened.lookup(never, request: [:], byName: false) else {
            Issue.record("after the reader thread's check, the lookup is a miss")
            return
        }
        let tiers = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: reopened)
        guard case .pending = tiers.lookup(never, request: [:]), case .miss = tiers.lookup(never, request: [:], checked: .dropped)
        else {
            Issue.record("the tiers go to the reader thread once, then miss")
            return
        }

        // Another URL's entry under this one's name (moved by hand): not served, not damage.
        try FileManager.default.createDirectory(
            atPath: (foreignPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: reopened.path(forName: name), toPath: foreignPath)
        let foreign = Fixtures.key("/foreign")
        guard case .unverified(let moved) = reopened.lookup(foreign, request: [:]), case .dropped = Self.check(reopened, moved, foreign)
        else {
            Issue.record("another URL's entry is not this one's")
            return
        }
        #expect(!reopened.isIndexed(foreign))
        #expect(reopened.statistics.corruptions == 0)
    }

    /// A purge while the start-up scan runs tombstones the key's own name even when the scan
    /// has not indexed it: a lookup on the reader thread (or the scan) that finds the file
    /// before the writer deletes it does not index it again.
    @Test func anEntryPurgedBeforeTheScanReachedItStaysPurged() throws {
        let fixture = try DiskFixture()
        fixture.store("/purged", body: pattern(100_000, seed: 9))
        let key = Fixtures.key("/purged")
        let reopened = try fixture.reopen(scanning: false)
        defer { reopened.stop() }
        reopened.index.withLock { $0.beginScan() }
        let gate = DispatchSemaphore(value: 0)
        reopened.writer.submit { gate.wait() }  // the file is still there when the lookup runs
        #expect(reopened.purge(key))
        guard case .unverified(let name) = reopened.lookup(key, request: [:]) else {
            gate.signal()
            Issue.record("the purged name is looked for on the reader thread")
            return
        }
        let check = Self.check(reopened, name, key)
        gate.signal()
        reopened.drain()
        guard case .dropped = check else {
            Issue.record("a purged entry the scan had not indexed is found again")
            return
        }
        #expect(!reopened.isIndexed(key))
        #expect(fixture.entryFiles().isEmpty, "the writer deleted the file")
    }

    /// After the reader thread's check, the tiers do not send the same lookup back to it: an
    /// entry it could not read for this request (out of descriptors) would otherwise go round
    /// between the loop and the reader for as long as that lasts.
    @Test func aLookupAfterACheckNeverGoesBackToTheReaderThread() throws {
        let fixture = try DiskFixture()
        fixture.store("/large", body: pattern(500_000, seed: 4))
        let key = Fixtures.key("/large")
        let tiers = TieredCache(memory: MemoryCache(limits: Fixtures.limits()), disk: fixture.cache)
        guard case .pending = tiers.lookup(key, request: [:]) else {
            Issue.record("a 500 KB record is checked on the reader thread")
            return
        }
        guard case .miss = tiers.lookup(key, request: [:], checked: .dropped) else {
            Issue.record("after a check that found nothing usable, the lookup is a miss")
            return
        }
        #expect(fixture.cache.isIndexed(key), "the entry stays: the check dropped nothing")
    }

    /// The reader thread looks for a name the loop found unindexed; the scan may index it (or
    /// end) in between. The entry is then the index's, checked as any: not a miss that sends
    /// the request upstream for an entry the cache holds, and not indexed twice.
    @Test func anEntryTheScanIndexesDuringTheLookForItIsStillFound() throws {
        let fixture = try DiskFixture()
        fixture.store("/raced", body: pattern(3 << 20, seed: 6))
        let key = Fixtures.key("/raced")
        let name = DiskCache.entryName(key: key, vary: [:])
        let reopened = try fixture.reopen(scanning: false)
        defer { reopened.stop() }
        #expect(reopened.unindexedEntry(named: name, key: key)?.loaded != nil, "the first look indexes it")
        // Now as if the scan had got there first.
        guard let again = reopened.unindexedEntry(named: name, key: key) else {
            Issue.record("an entry indexed since the loop looked is found in the index")
            return
        }
        #expect(again.entry.name == name && again.loaded == nil)
        guard case .sound(let stored?, _) = Self.check(reopened, name, key) else {
            Issue.record("the check serves it")
            return
        }
        #expect(checkedBody(reopened, stored) == pattern(3 << 20, seed: 6))

        // The scan ended in between.
        let ended = try fixture.reopen()
        defer { ended.stop() }
        waitForIndex(ended)
        #expect(ended.unindexedEntry(named: name, key: key)?.entry.name == name, "found in the complete index")
        #expect(ended.statistics.entries == 1)
    }

    /// Review 113: a disk holding more than ``DiskIndex/maxVariants`` entries of one URL (files
    /// put there by hand, or by another cache) kept them all after the scan, every lookup of
    /// the URL walking them; each later store removed one. The scan's end takes out the least
    /// recent down to the cap, files and all, however the scan met them.
    @Test func theScanKeepsAURLsMostRecentVariantsUpToTheCap() throws {
        let fixture = try DiskFixture()
        let extra = 6
        let total = DiskIndex.maxVariants + extra
        // Older responses from another cache, whose files are copied in: the ones to go.
        let other = try DiskFixture()
        for agent in 0..<extra {
            #expect(
                other.store(
                    "/many", body: pattern(70_000, seed: 1), vary: ["user-agent": "old \(agent)"], responseTime: 500 + Double(agent)))
        }
        for agent in 0..<DiskIndex.maxVariants {
            #expect(
                fixture.store(
                    "/many", body: pattern(70_000, seed: 2), vary: ["user-agent": "new \(agent)"], responseTime: 1000 + Double(agent)))
        }
        #expect(other.entryFiles().count == extra && fixture.entryFiles().count == DiskIndex.maxVariants)
        for file in other.entryFiles() {
            let target = fixture.directory + file.dropFirst(other.directory.count)
            try FileManager.default.createDirectory(
                atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: file, toPath: target)
        }
        #expect(fixture.entryFiles().count == total)
        let reopened = try fixture.reopen()
        defer { reopened.stop() }
        waitForIndex(reopened)
        reopened.drain()
        let kept = reopened.index.withLock { $0.lookup(Fixtures.key("/many")) }.map { $0.vary["user-agent"] ?? "" }
        #expect(kept.count == DiskIndex.maxVariants, "the cap holds after a restart")
        #expect(!kept.contains { $0.hasPrefix("old") }, "the least recent went")
        #expect(fixture.entryFiles().count == DiskIndex.maxVariants, "their files went too")
        #expect(reopened.statistics.entries == DiskIndex.maxVariants)
    }

    private static func check(_ cache: DiskCache, _ name: EntryName, _ key: CacheKey) -> DiskCache.Verification? {
        verified(cache, name, key: key)
    }
}
