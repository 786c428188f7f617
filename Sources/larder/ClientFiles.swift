import Glibc
import LarderIO
import LarderServer

/// The files `larder client --apply` writes under a root directory, and the manifest of them
/// that `--undo` reads: each file with a digest of what was written (a file changed since is
/// left in place), each directory it had to create, and what else undoing needs. A file that
/// exists and is not in the manifest is someone else's and is never written.
struct ClientFiles {
    static let manifestPath = "/etc/larder/client.manifest"

    /// `/`, or the `--root` directory every path is written under (no trailing slash).
    let root: String
    private(set) var files: [String: UInt64] = [:]
    private(set) var fileOrder: [String] = []
    private(set) var directories: [String] = []
    /// The commands to run once `--undo` has removed the files (`update-ca-certificates --fresh`).
    private(set) var afterUndo: [String] = []
    /// An earlier version's notes (`PATH: rm PATH && command`), shown as they were recorded.
    private(set) var earlierNotes: [String] = []

    /// A manifest that is a symbolic link, a FIFO or anything else but a regular file.
    struct NotARegularFile: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path) is not a regular file (a symbolic link, a FIFO...): nothing was read or removed" }
    }

    /// A manifest line naming a path `--undo` must not touch.
    struct UnsafePath: Error, CustomStringConvertible {
        let path: String
        var description: String { "it names '\(path)', which is not an absolute path under the root; nothing was removed" }
    }

    /// Reads the manifest under `root`, if any. Throws `SystemError` for a failed read and
    /// ``UnsafePath`` for a path that is relative or has a `.` or `..` component: the manifest is
    /// a file anyone with root may edit, and `--undo` removes what it names, so it is never
    /// let out of the root.
    init(root: String) throws {
        self.root = root
        // A manifest reached through a symbolic link under the root is another tree's; one
        // that is not a regular file (a link, a FIFO whose read would block) is no manifest.
        try refuseSymbolicLinks(above: ClientFiles.manifestPath)
        var info = stat()
        guard lstat(real(ClientFiles.manifestPath), &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFREG else { throw NotARegularFile(path: real(ClientFiles.manifestPath)) }
        let text = String(decoding: try FileSystem.readWhole(real(ClientFiles.manifestPath), limit: 1 << 20), as: UTF8.self)
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            switch (parts.first, parts.count) {
            case ("file", 3):
                guard ClientFiles.isUnderRoot(parts[2]) else { throw UnsafePath(path: parts[2]) }
                if let digest = UInt64(parts[1], radix: 16) { record(file: parts[2], digest: digest) }
            case ("dir", 2...):
                let directory = String(line.dropFirst(4))
                guard ClientFiles.isUnderRoot(directory) else { throw UnsafePath(path: directory) }
                directories.append(directory)
            case ("run", 2...): afterUndo.append(String(line.dropFirst(4)))
            case ("undo", 2...): earlierNotes.append(String(line.dropFirst(5)))
            default: break
            }
        }
    }

    /// Whether `path` stays under the root it is joined to: absolute, below `/`, and with no
    /// `.` or `..` component.
    static func isUnderRoot(_ path: String) -> Bool {
        path.hasPrefix("/") && path != "/" && !path.split(separator: "/").contains { $0 == ".." || $0 == "." }
    }

    /// `path` on this machine: under the root.
    func real(_ path: String) -> String { root == "/" ? path : root + path }

    func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(real(path), &info) == 0
    }

    /// Whether `path` was written by `larder client` (it is in the manifest).
    func owns(_ path: String) -> Bool { files[path] != nil }

    /// Writes `bytes` to `path` (creating its directories, 0755), replacing a file only if it
    /// is Larder's own, through a temporary file and a rename so no reader sees half of it.
    /// Throws ``SymlinkedDirectory`` for a directory on the way that is a symbolic link.
    mutating func write(_ bytes: [UInt8], to path: String, mode: UInt32) throws {
        try refuseSymbolicLinks(above: path)
        try makeDirectories(parentOf(path))
        let temporary = real(path) + ".larder-new"
        _ = try? Syscall.call("unlink", path: temporary) { unlink($0) }
        let fd = try FileSystem.createExclusive(temporary)
        do {
            try FileSystem.writeAll(fd, bytes)
            _ = try Syscall.call("fchmod") { fchmod(fd, mode_t(mode)) }
            Syscall.close(fd)
            try FileSystem.rename(temporary, to: AT_FDCWD, real(path))
        } catch {
            Syscall.close(fd)
            _ = unlink(temporary)
            throw error
        }
        record(file: path, digest: ClientFiles.digest(bytes))
    }

    /// Removes every file of the manifest that still holds what was written (returning the
    /// ones changed since, which stay), the directories it created that are empty, and the
    /// manifest itself. Throws ``SymlinkedDirectory``, before removing anything, when a path
    /// would be reached through a symbolic link under `--root`: it could lead out of the root.
    mutating func removeAll() throws -> (removed: [String], changed: [String]) {
        for path in fileOrder + directories.map({ $0 + "/." }) { try refuseSymbolicLinks(above: path) }
        var removed: [String] = []
        var changed: [String] = []
        for path in fileOrder {
            var info = stat()
            guard lstat(real(path), &info) == 0 else { continue }
            // Only a regular file can be what was written: a link, a FIFO (whose read would
            // block) or a directory put there since is someone else's.
            guard info.st_mode & S_IFMT == S_IFREG else {
                changed.append(path)
                continue
            }
            let now = try? FileSystem.readWhole(real(path), limit: 64 << 20)
            if let now, ClientFiles.digest(now) == files[path] {
                try FileSystem.remove(real(path))
                removed.append(path)
            } else {
                changed.append(path)
            }
        }
        try FileSystem.remove(real(ClientFiles.manifestPath))
        for directory in directories.reversed() {
            _ = rmdir(real(directory))  // ENOTEMPTY: something else lives there now; it stays
        }
        files = [:]
        fileOrder = []
        directories = []
        return (removed, changed)
    }

    /// Records a command to run once the files are removed (`update-ca-certificates --fresh`).
    mutating func runAfterUndo(_ command: String) {
        if !afterUndo.contains(command) { afterUndo.append(command) }
    }

    /// Writes the manifest (itself not listed: `--undo` removes it last).
    mutating func saveManifest() throws {
        let path = ClientFiles.manifestPath
        try refuseSymbolicLinks(above: path)
        // First, so a directory made for the manifest alone is listed in it.
        try makeDirectories(parentOf(path))
        var lines = ["# Written by larder client --apply: the files it wrote, for larder client --undo."]
        lines += directories.map { "dir " + $0 }
        lines += fileOrder.map { "file \(String(files[$0]!, radix: 16)) \($0)" }
        lines += afterUndo.map { "run " + $0 }
        lines += earlierNotes.map { "undo " + $0 }
        let temporary = real(path) + ".larder-new"
        _ = try? Syscall.call("unlink", path: temporary) { unlink($0) }
        let fd = try FileSystem.createExclusive(temporary)
        defer { Syscall.close(fd) }
        try FileSystem.writeAll(fd, Array((lines.joined(separator: "\n") + "\n").utf8))
        _ = try Syscall.call("fchmod") { fchmod(fd, 0o644) }
        try FileSystem.rename(temporary, to: AT_FDCWD, real(path))
    }

    private mutating func record(file path: String, digest: UInt64) {
        if files[path] == nil { fileOrder.append(path) }
        files[path] = digest
    }

    /// Creates `path` and its missing parents (0755: these are system configuration
    /// directories that unprivileged tools read), recording each one created.
    private mutating func makeDirectories(_ path: String) throws(SystemError) {
        guard path != "/", !path.isEmpty, !FileSystem.isDirectory(real(path)) else { return }
        try makeDirectories(parentOf(path))
        _ = try Syscall.call("mkdir", path: real(path)) { mkdir($0, 0o755) }
        if !directories.contains(path) { directories.append(path) }
        // mkdir's mode is masked by the umask, which may be 077 under sudo: set it outright.
        _ = try Syscall.call("chmod", path: real(path)) { chmod($0, 0o755) }
    }

    /// A directory under `--root` that is a symbolic link, which a write would follow out of
    /// the root.
    struct SymlinkedDirectory: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path) is a symbolic link: nothing is written through one under --root" }
    }

    /// Throws ``SymlinkedDirectory`` when a directory between the root and `path` is a
    /// symbolic link. Under `/` they are the administrator's own layout and followed.
    private func refuseSymbolicLinks(above path: String) throws {
        guard root != "/" else { return }
        var prefix = ""
        for component in parentOf(path).split(separator: "/") {
            prefix += "/" + component
            var info = stat()
            // Missing (made below, as a directory), or not to be looked at: writing says which.
            guard (try? Syscall.call("lstat", path: real(prefix)) { lstat($0, &info) }) != nil else { return }
            if info.st_mode & S_IFMT == S_IFLNK { throw SymlinkedDirectory(path: real(prefix)) }
        }
    }

    private func parentOf(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// FNV-1a, 64 bits: tells a file changed since it was written, not a guard against anyone.
    static func digest(_ bytes: [UInt8]) -> UInt64 {
        bytes.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01b3 }
    }
}
