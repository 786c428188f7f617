import CLarderSystem
import Glibc

/// An open file descriptor closed when the last reference goes away: read-only, or read-write
/// for a disk-cache segment file (appended to and marked with `pwrite`). Shared by the
/// responses that read from it, so a file evicted from the disk cache stays readable until its
/// readers finish (an unlinked file lives while a descriptor is open).
///
/// Sendable: the descriptor is an immutable integer; every read and write through it
/// (pread, pwrite, sendfile) names its offset, so there is no shared cursor state.
public final class OpenFile: Sendable {
    public let fd: Int32
    /// The budget an anonymous memory file holds a place in (`OpenFile+Anonymous.swift`).
    private let budget: MemoryFileBudget?

    public init(fd: Int32) {
        self.fd = fd
        budget = nil
    }

    init(fd: Int32, budget: MemoryFileBudget) {
        self.fd = fd
        self.budget = budget
    }

    /// Opens `path` read-only; a relative path is relative to the directory handle `directory`.
    public static func open(at directory: Int32 = AT_FDCWD, _ path: String) throws(SystemError) -> OpenFile {
        let fd = try Syscall.call("open", path: path) { openat(directory, $0, O_RDONLY | O_CLOEXEC) }
        return OpenFile(fd: fd)
    }

    deinit {
        Syscall.close(fd)
        budget?.giveBack()
    }
}
