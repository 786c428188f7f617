import CLarderSystem
import Glibc

/// An open file descriptor closed when the last reference goes away: read-only, or read-write
/// for a disk-cache segment file (appended to and marked with `pwrite`). Shared by the
/// responses that read from it, so a file evicted from the disk cache stays readable until its
/// readers finish (an unlinked file lives while a descriptor is open).
///
/// Sendable: the descriptor is an immutable integer; every read and write through it
/// (pread, pwrite, sendfile) names its offset, so there is no shared cursor state. A sealed
/// memory file's read-only mapping, set once before the file is shared, is immutable too.
public final class OpenFile: Sendable {
    public let fd: Int32
    /// The budget an anonymous memory file holds a place in (`OpenFile+Anonymous.swift`).
    private let budget: MemoryFileBudget?
    /// Where a sealed memory file is mapped (its address as an integer, 0 when not mapped),
    /// and how many bytes; unmapped by deinit.
    private let mappedAddress: Int
    private let mappedCount: Int

    public init(fd: Int32) {
        self.fd = fd
        budget = nil
        mappedAddress = 0
        mappedCount = 0
    }

    init(fd: Int32, budget: MemoryFileBudget, mappedAddress: Int = 0, mappedCount: Int = 0) {
        self.fd = fd
        self.budget = budget
        self.mappedAddress = mappedAddress
        self.mappedCount = mappedCount
    }

    /// The file's bytes, read-only, for a memory file sealed and mapped when it was made
    /// (``anonymous(copying:budget:)``): a transport that must see the bytes (TLS without
    /// kernel offload) writes them from here instead of reading them into a buffer first.
    /// Valid while this object lives: hold it for as long as the pointer is used.
    public var mapped: UnsafeRawBufferPointer? {
        guard mappedAddress != 0 else { return nil }
        return UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: mappedAddress), count: mappedCount)
    }

    /// Opens `path` read-only; a relative path is relative to the directory handle `directory`.
    /// A disk cache file: never through a symbolic link, only a regular file
    /// (``FileSystem/openOwnFile(at:_:writable:)``).
    public static func open(at directory: Int32 = AT_FDCWD, _ path: String) throws(SystemError) -> OpenFile {
        OpenFile(fd: try FileSystem.openOwnFile(at: directory, path))
    }

    deinit {
        if mappedAddress != 0 {
            _ = larder_unmap(mappedAddress, mappedCount)
            budget?.giveBackMapping()
        }
        Syscall.close(fd)
        budget?.giveBack()
    }
}
