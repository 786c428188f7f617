import Foundation
import Glibc
import LarderIO
import Testing

@testable import LarderCache

/// Entry files kept open for lookups on the event loops, which never open a file themselves
/// (a cold inode is a disk read every client of the loop would wait for).
@Suite struct OpenEntryFilesTests {
    /// A stored file is kept open: hits on the loop read through that descriptor. With none
    /// kept, the lookup opens nothing and hands the entry to the reader thread, which opens
    /// it and keeps it for the next lookup.
    @Test(arguments: [70_000, 3 << 20]) func aLookupOnTheLoopOpensNoFile(size: Int) throws {
        let fixture = try DiskFixture()
        fixture.store("/kept", body: pattern(size))
        #expect(fixture.cache.openFiles.count == 1, "kept once stored")
        guard case .hit = fixture.cache.lookup(Fixtures.key("/kept"), request: [:]) else {
            Issue.record("a kept file is read on the loop")
            return
        }
        fixture.cache.openFileLimit = 0
        #expect(fixture.cache.openFiles.count == 0)
        guard case .unverified = fixture.cache.lookup(Fixtures.key("/kept"), request: [:]) else {
            Issue.record("with no descriptor kept, the loop opens nothing: the reader thread does")
            return
        }
        fixture.cache.openFileLimit = 8
        #expect(fixture.read("/kept") == pattern(size), "served from the reader thread's check")
        #expect(fixture.cache.openFiles.count == 1, "and kept by it")
        guard case .hit = fixture.cache.lookup(Fixtures.key("/kept"), request: [:]) else {
            Issue.record("then found on the loop again")
            return
        }
    }

    /// A kept descriptor still holds a file after it is removed or renamed over by hand: the
    /// lookup sees it has no name left and never serves it.
    @Test func aKeptFileRemovedOrReplacedByHandIsNotServed() throws {
        let fixture = try DiskFixture()
        fixture.store("/gone", body: pattern(3 << 20, seed: 2))
        fixture.store("/other", body: pattern(3 << 20, seed: 3))
        let files = fixture.entryFiles()
        #expect(files.count == 2)
        func holds(_ path: String, _ url: String) -> Bool {
            guard let head = try? Data(contentsOf: URL(fileURLWithPath: path)).prefix(400) else { return false }
            return String(decoding: head, as: UTF8.self).contains(url)
        }
        let gone = try #require(files.first { holds($0, "/gone") })
        try FileManager.default.removeItem(atPath: gone)
        #expect(fixture.read("/gone") == nil, "the kept descriptor of a removed file is not read")
        #expect(fixture.cache.openFiles.count == 1, "and forgotten")
        // Another entry's sound file renamed over this one's name: the name's file is checked
        // (its key is not this URL's), never the old descriptor's bytes served.
        let other = try #require(fixture.entryFiles().first)
        fixture.store("/gone", body: pattern(3 << 20, seed: 4))
        let replacement = try #require(fixture.entryFiles().first { $0 != other })
        #expect(rename(other, replacement) == 0)
        #expect(fixture.read("/gone") == nil, "another URL's record under this name is not served")
        #expect(fixture.read("/gone") == nil)
    }

    /// Storing a new version replaces the descriptor kept for the old one.
    @Test func aReplacedEntryIsServedFromItsNewFile() throws {
        let fixture = try DiskFixture()
        fixture.store("/v", body: pattern(100_000, seed: 5))
        #expect(fixture.read("/v") == pattern(100_000, seed: 5))
        fixture.store("/v", body: pattern(120_000, seed: 6))
        #expect(fixture.read("/v") == pattern(120_000, seed: 6))
        #expect(fixture.cache.openFiles.count == 1)
    }

    /// Files removed by hand are let go by the sweep the server runs every few seconds, so
    /// that they do not hold their space until their URL is asked for again.
    @Test func theSweepLetsGoOfFilesRemovedByHand() throws {
        let fixture = try DiskFixture()
        fixture.store("/one", body: pattern(3 << 20, seed: 1))
        fixture.store("/two", body: pattern(3 << 20, seed: 2))
        #expect(fixture.cache.openFiles.count == 2)
        #expect(fixture.cache.openFiles.forgetUnlinked() == 0, "both still have their names")
        let first = try #require(fixture.entryFiles().first)
        try FileManager.default.removeItem(atPath: first)
        #expect(fixture.cache.openFiles.forgetUnlinked() == 1)
        #expect(fixture.cache.openFiles.count == 1)
    }

    /// Only records the loops read themselves are kept: up to 256 KiB (read whole on the loop
    /// when cached) and over 1 MiB (a head there, then blocks); those between are always
    /// checked whole on the reader thread, which opens them.
    @Test(arguments: [(70_000, true), (300_000, false), (3 << 20, true)])
    func onlyRecordsTheLoopsReadAreKept(size: Int, kept: Bool) throws {
        let fixture = try DiskFixture()
        fixture.store("/sized", body: pattern(size))
        #expect(fixture.cache.openFiles.count == (kept ? 1 : 0))
        #expect(fixture.read("/sized") == pattern(size))
        #expect(fixture.cache.openFiles.count == (kept ? 1 : 0), "nor kept by the reader thread's check")
    }

    /// Running out of descriptors (or memory) while opening a sound entry is not damage: the
    /// entry stays, uncounted, and is served once descriptors are back.
    @Test(arguments: [EMFILE, ENFILE, ENOMEM]) func aReadWithoutDescriptorsDropsNothing(errno: Int32) throws {
        let fixture = try DiskFixture()
        fixture.store("/sound", body: pattern(100_000))
        let name = DiskCache.entryName(key: Fixtures.key("/sound"), vary: [:])
        let entry = try #require(fixture.cache.index.withLock { $0.entry(named: name) })
        #expect(!fixture.cache.discard(entry, after: SystemError(call: "open", errno: errno)))
        fixture.cache.drain()
        #expect(fixture.cache.statistics.corruptions == 0)
        #expect(fixture.entryFiles().count == 1)
        #expect(fixture.read("/sound") == pattern(100_000))
    }

    /// At most the capacity is kept, the least recently used closed first.
    @Test func theLeastRecentlyUsedGoPastTheCapacity() throws {
        let files = OpenEntryFiles(capacity: 8)
        let directory = NSTemporaryDirectory() + "larder-open-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(FileManager.default.createFile(atPath: directory + "/f", contents: Data([1])))
        let names = (0..<20).map { EntryName(hashing: "name \($0)") }
        for name in names[0..<8] { files.keep(try OpenFile.open(directory + "/f"), named: name) }
        #expect(files.file(named: names[0]) != nil)  // used: the newest now
        for name in names[8..<12] { files.keep(try OpenFile.open(directory + "/f"), named: name) }
        #expect(files.count <= 8)
        #expect(files.file(named: names[0]) != nil, "used recently, kept")
        #expect(files.file(named: names[1]) == nil, "the oldest went first")
        #expect(files.file(named: names[11]) != nil)
        files.forget(names[11])
        #expect(files.file(named: names[11]) == nil)
        files.forgetAll()
        #expect(files.count == 0)
    }
}
