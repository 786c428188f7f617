import Glibc
import LarderIO
import Synchronization

/// The segment files of the disk tier: `v1/seg/<8 hex digits>`, each holding the entries of
/// small responses as records back to back (``DiskEntryFormat``, the same bytes an entry file
/// holds). Appending a record to an open file costs a fraction of creating a file per entry —
/// no inode, no directory entry, and records share pages (DISK-FORMAT.md, PERFORMANCE.md).
///
/// Threads and state: any thread appends (event loops for inline stores, the writer thread).
/// An ``Appender`` — one open segment being filled — belongs to the thread that took it from
/// `pool` until it is given back, so the records of one segment never interleave and only the
/// last one can be cut short by a crash. `files` holds one shared descriptor per segment for
/// lookups, `sendfile` and in-place marks; both are behind mutexes. Ids come from an atomic
/// counter and are never reused within a cache directory's life.
final class DiskSegments: Sendable {
    /// An open segment that records are appended to, held by one thread at a time.
    struct Appender: Sendable {
        let id: UInt32
        let file: OpenFile
        /// Bytes in the file: where the next record goes.
        var size: Int64
        fileprivate let generation: Int
    }

    private struct Pool {
        /// Bumped by ``reset()``: appenders of an earlier generation are not taken back.
        var generation = 0
        var idle: [Appender] = []
    }

    private let pool = Locked(Pool())
    private let files = Locked<[UInt32: OpenFile]>([:])
    private let lastID: Atomic<UInt32>

    /// The directory inside `v1/` that holds the segments.
    static let directoryName = "seg"

    init(lastID: UInt32) {
        self.lastID = Atomic(lastID)
    }

    /// `seg/0000002a` for segment 42, relative to `v1/`.
    static func relativePath(_ id: UInt32) -> String {
        let digits = String(id, radix: 16)
        return directoryName + "/" + String(repeating: "0", count: max(0, 8 - digits.utf8.count)) + digits
    }

    /// The ids of the segment files in `entriesPath/seg/`, ascending (names that are not eight
    /// hex digits are not Larder's and are left alone). A `seg` that is a symbolic link has none:
    /// segments are truncated and written in place, never in a directory elsewhere.
    static func list(entriesPath: String) -> [UInt32] {
        let names = (try? FileSystem.list(at: AT_FDCWD, entriesPath + "/" + directoryName)) ?? []
        return names.compactMap { name in name.utf8.count == 8 ? UInt32(name, radix: 16) : nil }.sorted()
    }

    /// An appender for the caller's exclusive use: an idle one, or a new segment created in
    /// `entries` (the `v1/` handle).
    func take(entries: Int32) throws(SystemError) -> Appender {
        if let idle = pool.withLock({ $0.idle.popLast() }) { return idle }
        let generation = pool.withLock { $0.generation }
        let id = lastID.add(1, ordering: .relaxed).newValue
        let fd = try FileSystem.createExclusiveCreatingDirectory(at: entries, DiskSegments.relativePath(id), readable: true)
        let file = OpenFile(fd: fd)
        files.withLock { $0[id] = file }
        return Appender(id: id, file: file, size: 0, generation: generation)
    }

    /// Gives an appender back for the next record; a `sealed` one (full, or failed) is not
    /// appended to again.
    func giveBack(_ appender: Appender, sealed: Bool) {
        guard !sealed else { return }
        pool.withLock { pool in
            if appender.generation == pool.generation { pool.idle.append(appender) }
        }
    }

    /// Takes the idle appenders out of use (their segments are then sealed, and can be
    /// compacted); returns their ids and sizes.
    func sealIdle() -> [(id: UInt32, size: Int64)] {
        pool.withLock { pool in
            defer { pool.idle.removeAll() }
            return pool.idle.map { ($0.id, $0.size) }
        }
    }

    /// Appends one record (`head` — preamble and head — then `body`) with one `pwritev`; returns
    /// its offset. A failed write is cut off again, so that the segment ends with whole records.
    func append(_ appender: inout Appender, head: [UInt8], body: [UInt8]) throws(SystemError) -> Int64 {
        let offset = appender.size
        do {
            try FileSystem.writeAll(appender.file.fd, head, body, at: offset)
        } catch {
            try? FileSystem.truncate(appender.file.fd, to: offset)
            throw error
        }
        appender.size = offset + Int64(head.count + body.count)
        return offset
    }

    /// Appends records already laid out back to back in `bytes`, with one write; returns their
    /// offset. A failed write is cut off again, as in ``append(_:head:body:)``.
    func append(_ appender: inout Appender, bytes: [UInt8]) throws(SystemError) -> Int64 {
        let offset = appender.size
        do {
            try FileSystem.writeAll(appender.file.fd, bytes, at: offset)
        } catch {
            try? FileSystem.truncate(appender.file.fd, to: offset)
            throw error
        }
        appender.size = offset + Int64(bytes.count)
        return offset
    }

    /// The shared descriptor of segment `id`, nil when it is gone.
    func file(_ id: UInt32) -> OpenFile? {
        files.withLock { $0[id] }
    }

    /// Opens an existing segment (the start-up scan) and registers its descriptor.
    func open(_ id: UInt32, entries: Int32) throws(SystemError) -> OpenFile {
        let file = OpenFile(fd: try FileSystem.openOwnFile(at: entries, DiskSegments.relativePath(id), writable: true))
        files.withLock { $0[id] = file }
        return file
    }

    /// Marks the record at `offset` removed, in place: the start-up scan skips it. Readers that
    /// are sending its body are not disturbed (only the magic changes).
    func markFreed(_ id: UInt32, at offset: Int64) {
        guard let file = file(id) else { return }
        try? FileSystem.writeAll(file.fd, Array(DiskEntryFormat.freedMagic.utf8), at: offset)
    }

    /// Deletes segment `id` (no live records left, or all copied elsewhere). Clients still
    /// sending a body from it keep their descriptor.
    func remove(_ id: UInt32, entries: Int32) {
        _ = files.withLock { $0.removeValue(forKey: id) }
        try? FileSystem.remove(at: entries, DiskSegments.relativePath(id))
    }

    /// Forgets every segment (the entry tree was cleared): appenders in use are not taken back.
    func reset() {
        pool.withLock { pool in
            pool.generation += 1
            pool.idle.removeAll()
        }
        files.withLock { $0.removeAll() }
    }
}
