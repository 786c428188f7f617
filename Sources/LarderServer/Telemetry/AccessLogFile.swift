import LarderIO
import Synchronization

/// Where access-log lines go: stdout, or a file (`log.access_file`) that SIGUSR1 reopens after
/// logrotate moved it away.
///
/// State: the descriptor number never changes once opened; a reopen puts the new file behind
/// the same number (dup3), so the loops that write with it never hold a closed or reused
/// descriptor, and lines buffered before the reopen land in the new file (none is lost).
final class AccessLogFile: Sendable {
    /// Empty: stdout.
    let path: String
    private let descriptor = Atomic<Int32>(1)

    init(path: String) {
        self.path = path
    }

    /// The descriptor the loops write to.
    var fd: Int32 { descriptor.load(ordering: .acquiring) }

    /// Opens the file (before the loops start); nothing for stdout.
    func open() throws(SystemError) {
        guard !path.isEmpty else { return }
        descriptor.store(try FileSystem.openForAppending(path), ordering: .releasing)
    }

    /// Opens the path again and moves the descriptor onto the new file; false for stdout.
    func reopen() throws(SystemError) -> Bool {
        guard !path.isEmpty else { return false }
        let fresh = try FileSystem.openForAppending(path)
        defer { Syscall.close(fresh) }
        try FileSystem.replaceDescriptor(fd, with: fresh)
        return true
    }
}
