import CLarderSystem
import Glibc

/// An open, read-only file descriptor closed when the last reference goes away. Shared by the
/// responses that read from it, so a file evicted from the disk cache stays readable until its
/// readers finish (an unlinked file lives while a descriptor is open).
///
/// Sendable: the descriptor is an immutable integer; reading with pread/sendfile at explicit
/// offsets has no shared cursor state.
public final class OpenFile: Sendable {
    public let fd: Int32
    /// Whether this is an anonymous memory file counted against ``anonymousLimit``
    /// (`OpenFile+Anonymous.swift`).
    let isAnonymous: Bool

    public init(fd: Int32) {
        self.fd = fd
        isAnonymous = false
    }

    init(anonymous fd: Int32) {
        self.fd = fd
        isAnonymous = true
    }

    /// Opens `path` read-only; a relative path is relative to the directory handle `directory`.
    public static func open(at directory: Int32 = AT_FDCWD, _ path: String) throws(SystemError) -> OpenFile {
        let fd = try Syscall.call("open", path: path) { openat(directory, $0, O_RDONLY | O_CLOEXEC) }
        return OpenFile(fd: fd)
    }

    deinit {
        Syscall.close(fd)
        if isAnonymous { OpenFile.releaseAnonymous() }
    }
}
