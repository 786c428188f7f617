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
}
