import Foundation
import Glibc
import LarderIO
import Testing

@testable import LarderCache

/// Disk hits of 80 to 256 KiB whose bytes the page cache holds are read and checked by the
/// lookup itself, on the event loop (`DiskCache.verifyCachedOnLoopMax`); others go to the
/// reader thread as before, and damage is found either way.
@Suite struct DiskCachedReadTests {
    @Test func aCachedEntryOf200KiBIsCheckedAndServedByTheLookup() throws {
        let fixture = try DiskFixture()
        let body = pattern(200_000, seed: 6)
        #expect(fixture.store("/cached", body: body))
        guard case .hit(let stored) = fixture.cache.lookup(Fixtures.key("/cached"), request: [:]) else {
            Issue.record("not served by the lookup")
            return
        }
        #expect(stored.memoryBody == body)
        // Over the limit: still the reader thread's.
        #expect(fixture.store("/larger", body: pattern(300_000)))
        guard case .unverified = fixture.cache.lookup(Fixtures.key("/larger"), request: [:]) else {
            Issue.record("a 300 KB entry was read on the loop")
            return
        }
    }

    @Test func aDamagedEntryOf200KiBIsNotServedFromTheLoop() throws {
        let fixture = try DiskFixture()
        let body = pattern(200_000, seed: 2)
        #expect(fixture.store("/damaged", body: body))
        let file = try #require(fixture.entryFiles().first)
        let fd = open(file, O_WRONLY)
        try #require(fd >= 0)
        var byte: UInt8 = 0xff
        let size = try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
        #expect(pwrite(fd, &byte, 1, off_t(size - 1_000)) == 1, "a byte of the body, overwritten in place")
        close(fd)
        if case .miss = fixture.cache.lookup(Fixtures.key("/damaged"), request: [:]) {} else { Issue.record("served damaged") }
        fixture.cache.drain()
        #expect(fixture.cache.statistics.corruptions == 1)
        #expect(fixture.entryFiles().isEmpty, "deleted")
    }

    /// Pages the kernel dropped, the head's or the body's, are read on the reader thread, never
    /// waited for on the loop (where the file system lets the test drop them: not tmpfs), for
    /// records over 80 KiB and, where the kernel can tell, for smaller ones too.
    @Test(arguments: [250_000, 70_000])
    func anEntryNotInThePageCacheGoesToTheReaderThread(size: Int) throws {
        let fixture = try DiskFixture()
        let body = pattern(size, seed: 3)
        #expect(fixture.store("/dropped", body: body))
        let file = try #require(fixture.entryFiles().first)
        let fd = open(file, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(fsync(fd) == 0)
        try #require(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
        // tmpfs keeps them; mincore(2) says (not readIfCached, whose asking starts readahead).
        let mapping = try #require(mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0))
        try #require(mapping != MAP_FAILED)
        var resident = [UInt8](repeating: 0, count: (size + 4_095) / 4_096)
        try #require(mincore(mapping, size, &resident) == 0)
        munmap(mapping, size)
        guard resident.allSatisfy({ $0 & 1 == 0 }), FileSystem.canTellCached else { return }
        func anyPageResident() -> Bool {
            guard let mapping = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), mapping != MAP_FAILED else { return true }
            defer { munmap(mapping, size) }
            var pages = [UInt8](repeating: 0, count: (size + 4_095) / 4_096)
            return mincore(mapping, size, &pages) != 0 || pages.contains { $0 & 1 != 0 }
        }
        // Not even the head is read with a wait: before the body, it is asked for as cached.
        // Asked again (at most 5 times) if its pages were back before the asking: on a busy CI
        // machine something brought them in between mincore(2) and the call, once.
        let entry = try #require(fixture.cache.index.withLock { $0.lookup(Fixtures.key("/dropped")) }.first)
        var refusedUncached = false
        for _ in 0..<5 where !refusedUncached {
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            if !anyPageResident() { refusedUncached = try fixture.cache.loadHead(entry, onlyIfCached: true) == nil }
            if !refusedUncached { usleep(10_000) }
        }
        #expect(refusedUncached, "a head not in the page cache is not read when asked for as cached")
        // Asking starts the pages' readahead: dropped again once it has landed (under
        // ThreadSanitizer the lookup below found them cached), at most 2 s. Looked up again (at
        // most 5 times) when they were back before the lookup read them, as above.
        var wentToTheReader = false
        for _ in 0..<5 where !wentToTheReader {
            for _ in 0..<200 {
                usleep(10_000)
                _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
                if !anyPageResident() { break }
            }
            try #require(!anyPageResident())
            if case .unverified = fixture.cache.lookup(Fixtures.key("/dropped"), request: [:]) { wentToTheReader = true }
        }
        guard wentToTheReader else {
            Issue.record("read on the loop though not cached")
            return
        }
        #expect(fixture.read("/dropped") == body, "the reader thread reads and checks it")
        #expect(fixture.cache.statistics.corruptions == 0)
    }
    /// On tmpfs (where the shared harness keeps caches) entry pages are memory: the lookup reads
    /// records up to 256 KiB without asking the page cache, and serves them checked.
    @Test func aMemoryBackedCacheIsReadOnTheLoopWithoutAsking() throws {
        let shm = try DiskFixture(directory: "/dev/shm/larder-disk-" + UUID().uuidString)
        let disk = try DiskFixture()
        #expect(shm.cache.memoryBacked == (try fileSystemType("/dev/shm") == "tmpfs"))
        #expect(disk.cache.memoryBacked == (try fileSystemType(disk.directory) == "tmpfs"))
        let body = pattern(200_000, seed: 8)
        #expect(shm.store("/shm", body: body))
        guard case .hit(let stored) = shm.cache.lookup(Fixtures.key("/shm"), request: [:]) else {
            Issue.record("not served by the lookup")
            return
        }
        #expect(stored.memoryBody == body)
    }

    /// `stat -f -c %T PATH`: the file system's type as coreutils names it.
    private func fileSystemType(_ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stat")
        process.arguments = ["-f", "-c", "%T", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        process.waitUntilExit()
        return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The reader thread checks the record's key as the loop does: an entry file replaced by
    /// another URL's whole, sound record (a copy, a restore, a rename gone wrong) is not that
    /// URL's response. Over 256 KiB every such hit goes to the reader thread.
    @Test func anotherURLsRecordInAnEntryFileIsNotServedByTheReaderThread() throws {
        let fixture = try DiskFixture()
        #expect(fixture.store("/a", body: pattern(300_000, seed: 4)))
        let before = Set(fixture.entryFiles())
        #expect(fixture.store("/b", body: pattern(200_000, seed: 5)))
        let a = try #require(before.first)
        let b = try #require(Set(fixture.entryFiles()).subtracting(before).first)
        try FileManager.default.removeItem(atPath: a)
        try FileManager.default.copyItem(atPath: b, toPath: a)
        guard case .unverified = fixture.cache.lookup(Fixtures.key("/a"), request: [:]) else {
            Issue.record("a 300 KB entry was not sent to the reader thread")
            return
        }
        let served = fixture.read("/a") != nil
        #expect(!served, "/b's bytes served for /a")
        fixture.cache.drain()
        #expect(fixture.cache.statistics.corruptions == 1)
        let intact = fixture.read("/b") == pattern(200_000, seed: 5)
        #expect(intact, "/b itself still served")
    }
}
