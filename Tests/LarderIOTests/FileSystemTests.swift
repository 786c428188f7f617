import CLarderSystem
import Foundation
import Glibc
import LarderIO
import Testing

/// `FileSystem.read(_:at:count:)`, which every disk hit reads its record through: the bytes at
/// an offset, fewer at the end of the file, and a failing `pread` named in its error.
@Suite(.timeLimit(.minutes(1))) struct FileSystemTests {
    @Test func readReturnsTheBytesAtAnOffsetAndFewerAtTheEnd() throws {
        let path = NSTemporaryDirectory() + "larder-read-" + UUID().uuidString
        defer { unlink(path) }
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(try FileSystem.read(fd, at: 0, count: 300_000) == bytes)
        #expect(try FileSystem.read(fd, at: 1_000, count: 70_000) == Array(bytes[1_000..<71_000]))
        #expect(try FileSystem.read(fd, at: 299_990, count: 100) == Array(bytes[299_990...]), "short at the end")
        #expect(try FileSystem.read(fd, at: 300_000, count: 100) == [], "nothing past the end")
        #expect(try FileSystem.read(fd, at: 5, count: 0) == [])
    }

    @Test func aFailingReadThrowsThePreadError() throws {
        let fd = open(NSTemporaryDirectory(), O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(throws: SystemError(call: "pread", errno: EISDIR)) { try FileSystem.read(fd, at: 0, count: 4096) }
        #expect(throws: SystemError(call: "pread", errno: EBADF)) { try FileSystem.read(-1, at: 0, count: 16) }
    }

    /// `readIfCached`, which an event loop reads a disk hit through: the bytes when the page
    /// cache holds them, nil when it does not (where the file system lets the test drop them),
    /// nil for a read that comes up short, so that the blocking read finds out why.
    @Test func readIfCachedReadsOnlyWhatThePageCacheHolds() throws {
        let path = NSTemporaryDirectory() + "larder-cached-" + UUID().uuidString
        defer { unlink(path) }
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(try FileSystem.readIfCached(fd, at: 0, count: 300_000) == bytes, "just written: in the page cache")
        #expect(try FileSystem.readIfCached(fd, at: 4_097, count: 200_000) == Array(bytes[4_097..<204_097]))
        #expect(try FileSystem.readIfCached(fd, at: 5, count: 0) == [])
        #expect(try FileSystem.readIfCached(fd, at: 299_990, count: 100) == nil, "short at the end")
        #expect(throws: SystemError.self) { try FileSystem.readIfCached(-1, at: 0, count: 16) }
        // Dropping the pages: clean ones go with POSIX_FADV_DONTNEED, except on tmpfs, where
        // they are the file (mincore(2) says which, independently of what is tested). On a
        // loaded host a page dropped may be back before the read (readahead): a few tries.
        try #require(fsync(fd) == 0)
        var dropped = false
        var waited = false
        for _ in 0..<5 where !waited {
            try #require(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            guard try residentPages(fd, length: 300_000) < (300_000 + 4_095) / 4_096 else { continue }
            dropped = true
            waited = try FileSystem.readIfCached(fd, at: 0, count: 300_000) == nil
        }
        guard dropped else { return }
        #expect(waited, "dropped: the read would wait")
        #expect(try FileSystem.read(fd, at: 0, count: 300_000) == bytes)
        #expect(try FileSystem.readIfCached(fd, at: 0, count: 300_000) == bytes, "read again: cached again")
    }

    /// On tmpfs, which has no RWF_NOWAIT, `readIfCached` asks cachestat(2) and reads: every
    /// page of a file there is in memory. Where /dev/shm is not a tmpfs, nothing to check.
    @Test func readIfCachedReadsATmpfsFileThroughCachestat() throws {
        let path = "/dev/shm/larder-cached-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: path, contents: nil) else { return }
        defer { unlink(path) }
        let bytes = (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 1) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 16)
        let probe = buffer.withUnsafeMutableBytes { larder_pread_nowait(fd, $0.baseAddress, $0.count, 0) }
        guard probe < 0, errno == EOPNOTSUPP else { return }  // not a tmpfs: the first test covers it
        #expect(try FileSystem.readIfCached(fd, at: 0, count: 150_000) == bytes)
        #expect(try FileSystem.readIfCached(fd, at: 10_000, count: 100_000) == Array(bytes[10_000..<110_000]))
        #expect(try FileSystem.readIfCached(fd, at: 149_990, count: 100) == nil, "short at the end")
        #expect(throws: SystemError(call: "cachestat", errno: EBADF)) { try FileSystem.readIfCached(-1, at: 0, count: 16) }
    }

    /// How many pages of the first `length` bytes of `fd` are in memory (mincore(2)).
    private func residentPages(_ fd: Int32, length: Int) throws -> Int {
        let mapping = try #require(mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0))
        try #require(mapping != MAP_FAILED)
        defer { munmap(mapping, length) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (length + page - 1) / page)
        try #require(mincore(mapping, length, &vector) == 0)
        return vector.filter { $0 & 1 != 0 }.count
    }
}
