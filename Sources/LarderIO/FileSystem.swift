import CLarderSystem
import Glibc
import Synchronization

/// File operations used by the disk cache, each through ``Syscall``. All of them block:
/// call them from a ``BlockingWorker``, except the few reads the hit path makes from the page
/// cache (open, pread of a small head, fstat) and the small stores an event loop makes while
/// the disk is fast (``DiskCache``'s `storeInline`).
public enum FileSystem {
    // Every path-taking call here also takes the directory the path is relative to (`at:`,
    // default: the working directory, so absolute paths work as they are). The disk tier's
    // store path names files relative to `tmp/` and `v1/` handles it opened once: the kernel
    // then walks one to three path components per call instead of the whole cache path.

    /// Opens a directory as a handle for the `at:` calls (O_PATH: no read access needed).
    /// `refusingLink`: a symbolic link in the last component fails (ENOTDIR) rather than being
    /// followed, for a directory Larder owns and empties (its cache's `tmp/` and `v1/`).
    public static func openDirectory(_ path: String, refusingLink: Bool = false) throws(SystemError) -> Int32 {
        let flags = larder_o_path | O_DIRECTORY | O_CLOEXEC | (refusingLink ? O_NOFOLLOW : 0)
        return try Syscall.call("open", path: path) { open($0, flags) }
    }

    /// Opens a file of the disk cache's own for reading (or reading and writing in place): never
    /// through a symbolic link in its last component (ELOOP), and only a regular file (a FIFO,
    /// socket or device fails with EINVAL, opened without blocking); to write, only a file with
    /// no other name (EMLINK: a hard link to a file elsewhere, or a snapshot's copy). A name
    /// planted in the cache directory can then neither turn Larder's truncations and writes on
    /// a file elsewhere nor hold a reader thread in `open` or `read` for good.
    public static func openOwnFile(at directory: Int32 = AT_FDCWD, _ path: String, writable: Bool = false) throws(SystemError)
        -> Int32
    {
        let flags = (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        let fd = try Syscall.call("open", path: path) { openat(directory, $0, flags) }
        var info = stat()
        do {
            _ = try Syscall.call("fstat") { fstat(fd, &info) }
        } catch {
            Syscall.close(fd)
            throw error
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            Syscall.close(fd)
            throw SystemError(call: "open (not a regular file)", errno: EINVAL)
        }
        guard !writable || info.st_nlink == 1 else {
            Syscall.close(fd)
            throw SystemError(call: "open (a file with other names)", errno: EMLINK)
        }
        return fd
    }

    /// Whether an open of ``openOwnFile(at:_:writable:)`` failed because the name is not a file
    /// of the cache's own (a link, not a regular file, a file with other names): the name can
    /// be removed without touching anything else.
    public static func isForeign(_ error: SystemError) -> Bool {
        error.errno == ELOOP || error.errno == EINVAL || error.errno == EMLINK
    }

    /// Removes `path` (relative to `directory`) if it is a symbolic link (the link, not what it
    /// names); whether it was one.
    @discardableResult
    public static func removeIfLink(at directory: Int32 = AT_FDCWD, _ path: String) -> Bool {
        var info = stat()
        guard (try? Syscall.call("fstatat", path: path, { fstatat(directory, $0, &info, AT_SYMLINK_NOFOLLOW) })) != nil,
            (info.st_mode & S_IFMT) == S_IFLNK
        else {
            return false
        }
        return (try? remove(at: directory, path)) != nil
    }

    /// Makes descriptor `target` refer to what `source` refers to, atomically (dup3, close-on-
    /// exec): a thread using `target` meanwhile sees the old file or the new one.
    public static func replaceDescriptor(_ target: Int32, with source: Int32) throws(SystemError) {
        _ = try Syscall.call("dup3") { larder_dup3_cloexec(source, target) }
    }

    /// Creates `path` and missing parents (mode 0700: cache contents are private).
    public static func makeDirectories(at directory: Int32 = AT_FDCWD, _ path: String) throws(SystemError) {
        // Leaf first: usually only the last component is missing, so this is one mkdir, and
        // the parents are walked only when the kernel says one is missing.
        do {
            try makeDirectory(at: directory, path)
        } catch  where error.errno == ENOENT {
            guard let parent = parent(of: path) else { throw error }
            try makeDirectories(at: directory, parent)
            try makeDirectory(at: directory, path)
        }
    }

    /// One mkdir (mode 0700); an existing directory is not an error.
    private static func makeDirectory(at directory: Int32, _ path: String) throws(SystemError) {
        do {
            _ = try Syscall.call("mkdirat", path: path) { mkdirat(directory, $0, 0o700) }
        } catch  where error.errno == EEXIST {
            return
        } catch {
            throw SystemError(call: "mkdir \(path)", errno: error.errno)
        }
    }

    /// `path` without its last component; nil for a single component or `/x`.
    private static func parent(of path: String) -> String? {
        // On the bytes: a Character search runs grapheme breaking over the whole path.
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.startIndex else { return nil }
        return String(path[..<slash])
    }

    /// Renames `from` to `to`, creating the destination's directory when it does not exist
    /// yet (tried after the rename fails, so the common case is one system call).
    public static func renameCreatingDirectory(
        at fromDirectory: Int32 = AT_FDCWD, _ from: String, to toDirectory: Int32 = AT_FDCWD, _ to: String
    ) throws(SystemError) {
        do {
            try rename(at: fromDirectory, from, to: toDirectory, to)
        } catch  where error.errno == ENOENT {
            guard let parent = parent(of: to) else { throw error }
            try makeDirectories(at: toDirectory, parent)
            try rename(at: fromDirectory, from, to: toDirectory, to)
        }
    }

    public static func rename(
        at fromDirectory: Int32 = AT_FDCWD, _ from: String, to toDirectory: Int32 = AT_FDCWD, _ to: String
    ) throws(SystemError) {
        _ = try Syscall.call("rename", paths: from, to) { renameat(fromDirectory, $0, toDirectory, $1) }
    }

    /// Opens `path` for appending, creating it (mode 0640) if missing: a log file.
    public static func openForAppending(_ path: String) throws(SystemError) -> Int32 {
        try Syscall.call("open", path: path) { open($0, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640) }
    }

    /// Opens for writing (and with `readable`, reading) a new file that must not exist yet.
    public static func createExclusive(at directory: Int32 = AT_FDCWD, _ path: String, readable: Bool = false) throws(SystemError) -> Int32
    {
        let access = readable ? O_RDWR : O_WRONLY
        return try Syscall.call("open", path: path) { openat(directory, $0, access | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
    }

    /// ``createExclusive(at:_:)`` whose missing parent directories are created after the first
    /// attempt fails.
    public static func createExclusiveCreatingDirectory(
        at directory: Int32 = AT_FDCWD, _ path: String, readable: Bool = false
    ) throws(SystemError) -> Int32 {
        do {
            return try createExclusive(at: directory, path, readable: readable)
        } catch  where error.errno == ENOENT {
            guard let parent = parent(of: path) else { throw error }
            try makeDirectories(at: directory, parent)
            return try createExclusive(at: directory, path, readable: readable)
        }
    }

    /// Removes a file; a missing file is not an error.
    public static func remove(at directory: Int32 = AT_FDCWD, _ path: String) throws(SystemError) {
        do {
            _ = try Syscall.call("unlink", path: path) { unlinkat(directory, $0, 0) }
        } catch  where error.errno == ENOENT {
            return
        } catch {
            throw SystemError(call: "unlink \(path)", errno: error.errno)
        }
    }

    /// Names in a directory, without "." and "..".
    public static func list(_ path: String) throws(SystemError) -> [String] {
        let directory = try Syscall.pointer("opendir") { opendir(path) }
        defer { closedir(directory) }
        return names(in: directory)
    }

    /// Names in the directory `path` relative to `directory` (a handle, O_PATH or not), without
    /// following a symbolic link in its last component (ENOTDIR).
    public static func list(at directory: Int32, _ path: String = ".") throws(SystemError) -> [String] {
        let fd = try Syscall.call("open", path: path) { openat(directory, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard let stream = fdopendir(fd) else {
            let code = errno
            Syscall.close(fd)
            throw SystemError(call: "fdopendir", errno: code)
        }
        defer { closedir(stream) }
        return names(in: stream)
    }

    private static func names(in directory: OpaquePointer) -> [String] {
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Removes a directory tree without following a symbolic link anywhere in it: a link is
    /// removed, never what it names, so a link planted in the tree (or the tree's own name made
    /// one) cannot empty a directory elsewhere. Trees deeper than `maxDepth` are left in part.
    public static func removeTree(_ path: String) {
        removeTree(at: AT_FDCWD, path, depth: 0)
    }

    private static let maxDepth = 32

    private static func removeTree(at parent: Int32, _ name: String, depth: Int) {
        // O_NOFOLLOW | O_DIRECTORY: a link, or anything but a directory, fails here and is
        // unlinked itself.
        guard depth < maxDepth,
            let fd = try? Syscall.call("open", path: name, { openat(parent, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) })
        else {
            _ = try? Syscall.call("unlink", path: name) { unlinkat(parent, $0, 0) }
            return
        }
        guard let stream = fdopendir(fd) else {
            Syscall.close(fd)
            return
        }
        let directory = dirfd(stream)
        for child in names(in: stream) {
            do {
                _ = try Syscall.call("unlink", path: child) { unlinkat(directory, $0, 0) }
            } catch  where error.errno == EISDIR {
                removeTree(at: directory, child, depth: depth + 1)
            } catch {
                continue
            }
        }
        closedir(stream)
        _ = try? Syscall.call("rmdir", path: name) { unlinkat(parent, $0, AT_REMOVEDIR) }
    }

    /// The permission bits of `path` (following symbolic links).
    public static func permissions(of path: String) throws(SystemError) -> UInt32 {
        var info = stat()
        _ = try Syscall.call("stat", path: path) { stat($0, &info) }
        return UInt32(info.st_mode) & 0o7777
    }

    /// Size of an open file.
    public static func size(of fd: Int32) throws(SystemError) -> Int64 {
        var info = stat()
        _ = try Syscall.call("fstat") { fstat(fd, &info) }
        return Int64(info.st_size)
    }

    /// The size of the file open as `fd` and how many names it has: 0 once it is unlinked, or
    /// renamed over, while still open.
    public static func status(of fd: Int32) throws(SystemError) -> (size: Int64, links: Int) {
        var info = stat()
        _ = try Syscall.call("fstat") { fstat(fd, &info) }
        return (Int64(info.st_size), Int(info.st_nlink))
    }

    /// A whole small file (a configuration, a certificate, a /proc entry); fails with EFBIG
    /// past `limit` bytes.
    public static func readWhole(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let fd = try Syscall.call("open", path: path) { open($0, O_RDONLY | O_CLOEXEC) }
        defer { Syscall.close(fd) }
        var bytes: [UInt8] = []
        while true {
            let chunk = try read(fd, at: Int64(bytes.count), count: 64 << 10)
            bytes += chunk
            if bytes.count > limit { throw SystemError(call: "read", errno: EFBIG) }
            if chunk.isEmpty { return bytes }
        }
    }

    /// Reads up to `count` bytes at `offset` (fewer at end of file).
    public static func read(_ fd: Int32, at offset: Int64, count: Int) throws(SystemError) -> [UInt8] {
        // Not zero-filled first: every disk hit of up to 1 MiB is read through here, and
        // filling it before the read overwrites it was a tenth of such a hit's CPU.
        var failure: SystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, total in
            do throws(SystemError) {
                try readFully(fd, at: offset, into: buffer, from: &total)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Reads into `buffer[total...]` from `offset + total` until it is full or the file ends,
    /// advancing `total`.
    private static func readFully(
        _ fd: Int32, at offset: Int64, into buffer: UnsafeMutableBufferPointer<UInt8>, from total: inout Int
    ) throws(SystemError) {
        while total < buffer.count {
            let got = try Syscall.call("pread") {
                pread(fd, buffer.baseAddress! + total, buffer.count - total, off_t(offset) + off_t(total))
            }
            if got == 0 { return }
            total += got
        }
    }

    /// Reads `count` bytes at `offset` only if the page cache holds every page of them, so
    /// that an event loop never waits for a disk: nil when one is not in memory, when the read
    /// comes up short (the caller's blocking read then finds out why), or when the kernel
    /// cannot tell. Asks with preadv2(RWF_NOWAIT), or, on a file system without it (tmpfs),
    /// cachestat(2) before a plain read; a page dropped between the two makes that read wait.
    public static func readIfCached(_ fd: Int32, at offset: Int64, count: Int) throws(SystemError) -> [UInt8]? {
        guard count > 0 else { return [] }
        var failure: SystemError?
        var whole = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, total in
            do throws(SystemError) {
                if !cacheQueries.withoutNoWait.load(ordering: .relaxed) {
                    do throws(SystemError) {
                        total = try Syscall.call("preadv2") { larder_pread_nowait(fd, buffer.baseAddress, count, off_t(offset)) }
                        whole = total == count
                        return
                    } catch  where error.errno == EAGAIN {
                        return
                    } catch  where error.errno == EOPNOTSUPP {
                        cacheQueries.withoutNoWait.store(true, ordering: .relaxed)
                    }
                }
                guard try isCached(fd, offset: offset, count: count) else { return }
                try readFully(fd, at: offset, into: buffer, from: &total)
                whole = total == count
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return whole ? bytes : nil
    }

    /// Whether cachestat(2) finds every page of the range in the page cache; false where it
    /// cannot say (before Linux 6.5, remembered; a file system without a page cache). Other
    /// failures (a bad descriptor) are the read's.
    private static func isCached(_ fd: Int32, offset: Int64, count: Int) throws(SystemError) -> Bool {
        guard !cacheQueries.withoutCachestat.load(ordering: .relaxed) else { return false }
        var cached: UInt64 = 0
        guard larder_cached_pages(fd, UInt64(offset), UInt64(count), &cached) == 0 else {
            let code = errno
            if code == ENOSYS { cacheQueries.withoutCachestat.store(true, ordering: .relaxed) }
            if code == ENOSYS || code == EOPNOTSUPP { return false }
            throw SystemError(call: "cachestat", errno: code)
        }
        let page = Int64(cacheQueries.pageSize)
        let pages = (offset + Int64(count) - 1) / page - offset / page + 1
        return cached >= UInt64(pages)
    }

    /// Whether ``readIfCached(_:at:count:)`` can still tell cached pages from others: false once
    /// the kernel was found to offer neither preadv2(RWF_NOWAIT) nor cachestat(2).
    public static var canTellCached: Bool {
        !(cacheQueries.withoutNoWait.load(ordering: .relaxed) && cacheQueries.withoutCachestat.load(ordering: .relaxed))
    }

    /// Whether the file system holding `fd` keeps its files in memory (tmpfs, ramfs): a read
    /// of it never waits for a disk (swap aside), so there is nothing to ask the page cache.
    public static func isMemoryBacked(_ fd: Int32) -> Bool {
        var magic = 0
        guard (try? Syscall.call("fstatfs", { larder_fs_magic(fd, &magic) })) != nil else { return false }
        return magic == 0x0102_1994 || magic == 0x8584_58f6  // TMPFS_MAGIC, RAMFS_MAGIC
    }

    /// What the kernel was found not to offer, asked once per process.
    private static let cacheQueries = CacheQueries()

    private final class CacheQueries: Sendable {
        let withoutNoWait = Atomic<Bool>(false)
        let withoutCachestat = Atomic<Bool>(false)
        let pageSize = max(4096, sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Writes all of `bytes` at the current position.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let written = try Syscall.call("write") { Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            offset += written
        }
    }

    /// Writes all of `bytes` at the current position.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try writeAll(fd, raw) }
        }
        try result.get()
    }

    /// Writes all of `first` and then all of `second`, at the current position or at `position`:
    /// one `writev`/`pwritev` when the kernel takes everything at once (as it does for regular
    /// files), plain writes for any remainder.
    public static func writeAll(_ fd: Int32, _ first: [UInt8], _ second: [UInt8], at position: Int64? = nil) throws(SystemError) {
        let result = first.withUnsafeBytes { a in
            second.withUnsafeBytes { b in
                Result { () throws(SystemError) in
                    var vectors = (
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count),
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)
                    )
                    let written = try withUnsafeMutableBytes(of: &vectors) { raw throws(SystemError) in
                        let base = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
                        if let position {
                            return try Syscall.call("pwritev") { pwritev(fd, base, 2, off_t(position)) }
                        }
                        return try Syscall.call("writev") { writev(fd, base, 2) }
                    }
                    if written < a.count {
                        try writeAll(fd, UnsafeRawBufferPointer(rebasing: a[written...]), at: position.map { $0 + Int64(written) })
                        try writeAll(fd, b, at: position.map { $0 + Int64(a.count) })
                    } else if written < a.count + b.count {
                        try writeAll(
                            fd, UnsafeRawBufferPointer(rebasing: b[(written - a.count)...]), at: position.map { $0 + Int64(written) })
                    }
                }
            }
        }
        try result.get()
    }

    /// Writes all of `bytes` at `position`, or at the current position when it is nil.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at position: Int64?) throws(SystemError) {
        guard let position else { return try writeAll(fd, bytes) }
        var offset = 0
        while offset < bytes.count {
            let written = try Syscall.call("pwrite") {
                pwrite(fd, bytes.baseAddress! + offset, bytes.count - offset, off_t(position) + off_t(offset))
            }
            offset += written
        }
    }

    /// Cuts an open file to `length` bytes.
    public static func truncate(_ fd: Int32, to length: Int64) throws(SystemError) {
        _ = try Syscall.call("ftruncate") { ftruncate(fd, off_t(length)) }
    }

    /// Writes all of `bytes` at `position`.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], at position: Int64) throws(SystemError) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try writeAll(fd, raw, at: position) }
        }
        try result.get()
    }

    /// Free bytes on the filesystem holding `path`.
    public static func availableBytes(_ path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }
}

extension FileSystem {
    /// The process's working directory (nil if it cannot be named: removed, or too long).
    public static func workingDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let found = try? Syscall.call("getcwd") { getcwd(&buffer, buffer.count) == nil ? -1 : 0 }
        guard found != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
