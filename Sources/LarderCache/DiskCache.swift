import Glibc
import LarderHTTP
import LarderIO
import Logging
import Synchronization

/// The persistent tier. Small responses (bodies up to ``inlineLimit``) are records appended
/// to segment files, `directory/v1/seg/<id>` (``DiskSegments``); larger ones have a file each,
/// `directory/v1/ab/cd/<hash>`, written to `directory/tmp/` while the body streams and renamed
/// into place only once it is complete and its length checked (see ``DiskEntryFormat`` for
/// the entry layout and DISK-FORMAT.md for both).
///
/// Threads: lookups run on event loops (a mutex-guarded index probe, then open + pread of the
/// head from the page cache), and so do ``storeInline(_:head:)``'s small writes while the disk
/// is fast. Everything else that blocks — streamed writes, unlinking, evicting, verifying
/// checksums, the start-up scan — runs on ``BlockingWorker``s: `writer` (writes, renames,
/// deletions, eviction, in order), `reader` (checksum verification, reads for promotion into
/// memory) and `scanner` (the start-up scan, then it ends).
///
/// State: `index` and `limits` are guarded by their mutexes; counters are atomics; `segments`
/// guards its own state (an appender belongs to one thread at a time).
/// Crash safety: an entry is complete once it is indexed (a file renamed from `tmp/`, a record
/// appended with one `pwritev`); leftovers in `tmp/` are deleted at start-up; a record cut
/// short by a crash ends its segment and is cut off by the start-up scan; anything damaged by
/// power loss fails its size or checksum check and is dropped instead of served.
public final class DiskCache: Sendable {
    /// The absolute cache directory.
    public let directory: String
    let index = Locked(DiskIndex())
    let segments: DiskSegments
    /// Segments that existed at start: the start-up scan reads them (later ones are indexed as
    /// they are written).
    let startSegments: [UInt32]
    let limits: Locked<Limits>
    let writer = BlockingWorker(name: "larder-disk-w")
    let reader = BlockingWorker(name: "larder-disk-r")
    /// Runs the start-up scan only, so checksum checks for early hits need not wait for it.
    let scanner = BlockingWorker(name: "larder-disk-s")
    /// Checks large entries in the background (`disk.scrub_rate`).
    public let scrubber = DiskScrubber()
    let logger: Logger
    let scanComplete = Atomic<Bool>(false)
    /// Monotonic time until which new writes are refused after a disk error.
    let degradedUntil = Atomic<UInt64>(0)
    let lastErrorLog = Atomic<UInt64>(0)
    let trashCounter = Atomic<Int>(0)
    let temporarySequence = Atomic<UInt64>(0)
    /// `tmp/` and `v1/`, opened once: stores and lookups name files relative to them (see
    /// ``FileSystem/openDirectory(_:)``). ``removeAll()`` points the same descriptor number at
    /// the new `v1/` (dup3 replaces it atomically), so a loop using it that very moment sees
    /// the old directory or the new one, never a closed or reused number, and no descriptor
    /// outlives a clear.
    let temporaryDirectoryFD: Int32
    let entriesDirectoryFD: Atomic<Int32>
    /// An inline store whose file calls take longer than this (10 ms) means the disk is not
    /// fast enough to write on an event loop. Well above a scheduler time slice (3-4 ms): a loop
    /// thread preempted in the middle of a write on a busy core is not a slow disk. (A variable
    /// so that tests can make every store "slow".)
    let slowInlineWrite = Atomic<UInt64>(10_000_000)
    /// Monotonic time before which ``storeInline(_:head:)`` declines (after a slow inline write).
    let inlineAllowedAfter = Atomic<UInt64>(0)
    /// Segments whose compaction failed (writer thread): not tried again.
    let uncompactable = Locked<Set<UInt32>>([])

    public let evictions = AtomicCounter()
    public let corruptions = AtomicCounter()
    public let writeErrors = AtomicCounter()
    public let writesCompleted = AtomicCounter()

    /// Size limits (a smaller `maxBytes` applied with ``setLimits(_:)`` evicts down to it).
    public struct Limits: Sendable, Equatable {
        public var maxBytes: Int64
        public var maxObjectBytes: Int64
        public init(maxBytes: Int64, maxObjectBytes: Int64) {
            self.maxBytes = maxBytes
            self.maxObjectBytes = maxObjectBytes
        }
    }

    /// Counters and sizes for metrics.
    public struct Statistics: Sendable {
        public var entries: Int
        public var bytes: Int64
        public var evictions: Int
        public var corruptions: Int
        public var writeErrors: Int
        public var degraded: Bool
        public var indexComplete: Bool
    }

    /// Creates the directory layout (`v1/`, `tmp/`) if needed. Nothing is read yet: call
    /// ``start()``.
    public init(directory: String, limits: Limits, logger: Logger) throws(SystemError) {
        var absolute = directory
        if !absolute.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let cwd =
                getcwd(&buffer, buffer.count).map { _ in
                    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                } ?? "."
            absolute = cwd + "/" + directory
        }
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        self.directory = absolute
        self.limits = Locked(limits)
        self.logger = logger
        try FileSystem.makeDirectories(absolute + "/v1")
        try FileSystem.makeDirectories(absolute + "/tmp")
        startSegments = DiskSegments.list(entriesPath: absolute + "/v1")
        segments = DiskSegments(lastID: startSegments.last ?? 0)
        temporaryDirectoryFD = try FileSystem.openDirectory(absolute + "/tmp")
        do {
            entriesDirectoryFD = Atomic(try FileSystem.openDirectory(absolute + "/v1"))
        } catch {
            Syscall.close(temporaryDirectoryFD)
            throw error
        }
    }

    deinit {
        scrubber.requestStop()
        Syscall.close(temporaryDirectoryFD)
        Syscall.close(entriesDirectoryFD.load(ordering: .acquiring))
    }

    /// Removes leftover temporary files and starts rebuilding the index from the entry files in
    /// the background. Lookups work meanwhile (see ``lookup(_:request:)``).
    public func start() {
        writer.submit { [self] in
            for name in (try? FileSystem.list(directory + "/tmp")) ?? [] {
                try? FileSystem.remove(directory + "/tmp/" + name)
            }
            for name in (try? FileSystem.list(directory)) ?? [] where name.hasPrefix("trash-") {
                FileSystem.removeTree(directory + "/" + name)
            }
        }
        index.withLock { $0.beginScan() }
        scanner.submit { [self] in
            scan()
            scanner.stop()
        }
        scrubber.start(self)
    }

    /// Waits for queued writes and deletions (tests and shutdown).
    public func drain() {
        writer.drain()
    }

    public func stop() {
        scrubber.stop()
        writer.drain()
        writer.stop()
        reader.stop()
        scanner.stop()
    }

    public var isIndexComplete: Bool { scanComplete.load(ordering: .acquiring) }

    public var statistics: Statistics {
        let (entries, bytes) = index.withLock { ($0.count, $0.physicalBytes) }
        return Statistics(
            entries: entries, bytes: bytes, evictions: evictions.load(), corruptions: corruptions.load(),
            writeErrors: writeErrors.load(), degraded: isDegraded, indexComplete: isIndexComplete)
    }

    public var currentLimits: Limits { limits.withLock { $0 } }

    /// Applies new limits, evicting down to a smaller size in the background.
    public func setLimits(_ newLimits: Limits) {
        limits.withLock { $0 = newLimits }
        writer.submit { [self] in evictIfNeeded() }
    }

    // MARK: Names

    /// The file name for a key and its Vary values.
    static func fileName(key: CacheKey, vary: [String: String]) -> String {
        if vary.isEmpty { return StableHash.hex(key.url) }
        let secondary = vary.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        return StableHash.hex(key.url + "\n" + secondary)
    }

    /// `directory/v1/ab/cd/name` for a name `abcd…`.
    func path(forName name: String) -> String {
        directory + "/v1/" + relativePath(forName: name)
    }

    /// `ab/cd/name` (inside `v1/`) for a name `abcd…`, built in one allocation: every disk lookup
    /// and store needs one.
    func relativePath(forName name: String) -> String {
        let count = name.utf8.count
        // Entry names are 32 hex digits; a shorter name (none is made) keeps the plain spelling.
        guard count >= 4 else {
            return String(name.prefix(2)) + "/" + String(name.dropFirst(2).prefix(2)) + "/" + name
        }
        return String(unsafeUninitializedCapacity: count + 6) { path in
            // The name goes in after the six bytes of `ab/cd/`, which are then copied from it.
            var end = 6
            for byte in name.utf8 {
                path[end] = byte
                end += 1
            }
            path[0] = path[6]
            path[1] = path[7]
            path[2] = UInt8(ascii: "/")
            path[3] = path[8]
            path[4] = path[9]
            path[5] = UInt8(ascii: "/")
            return end
        }
    }

    // MARK: Writing

    /// Starts storing a response whose head is known; nil when the disk tier is refusing
    /// writes after an error, or the announced length is over `max_object_bytes`.
    public func beginWrite(key: CacheKey, head: DiskEntryFormat.Head, expectedLength: Int?) -> DiskWrite? {
        guard !isDegraded else { return nil }
        let maxObject = limits.withLock { $0.maxObjectBytes }
        if let expectedLength, Int64(expectedLength) > maxObject { return nil }
        let name = DiskCache.fileName(key: key, vary: head.vary)
        return DiskWrite(cache: self, key: key, name: name, head: head, maxBytes: maxObject)
    }

    /// Stores a complete response whose body is in memory, in one writer job (temporary file,
    /// then rename), for bodies small enough to have been kept whole. With `wakeWriter` false
    /// the job waits for the next ``wakeWriter()``: an event loop stores every miss of one
    /// epoll batch and wakes the writer once (on one core each wake-up is a context switch).
    /// `body` is the body's bytes when the caller has them at hand (the stored response may keep
    /// them in an anonymous memory file); by default they are taken from `stored`. `head`
    /// describes `stored`: the entry's header fields are `stored`'s, copied in wire form.
    public func store(_ stored: StoredResponse, body: [UInt8]? = nil, head: DiskEntryFormat.Head, wakeWriter: Bool = true) {
        assert(head.headers == stored.headers, "the entry's fields are taken from stored")
        guard let body = body ?? stored.memoryBody, !isDegraded,
            Int64(body.count) <= limits.withLock({ $0.maxObjectBytes })
        else { return }
        let name = DiskCache.fileName(key: stored.key, vary: head.vary)
        let key = stored.key
        let wireFields = stored.wireFields
        writer.submit(wake: wakeWriter) { [self] in
            writeEntry(key: key, name: name, head: head, wireFields: wireFields, body: body, onWriter: true)
        }
    }

    /// Stores a small complete response on the calling thread (an event loop, after its batch
    /// of responses went out), as nginx does: on one core, handing a 1 KiB entry to the writer
    /// thread costs more in wake-ups and context switches than appending it to a segment.
    /// Returns false, doing nothing, when the entry must go to ``store(_:head:wakeWriter:)``
    /// instead: the body is over ``inlineLimit``, or an inline write was slow recently — one
    /// write over ``slowInlineWrite`` sends every write to the writer for ``inlineBackoff``, so
    /// a slow or stalled disk costs the loop one stall, not one per miss. (Deletions queued on
    /// the writer cannot undo an inline store: they name the file or record they remove, and a
    /// record appended now is neither.) `body` and `head` as for ``store(_:body:head:wakeWriter:)``.
    public func storeInline(_ stored: StoredResponse, body: [UInt8]? = nil, head: DiskEntryFormat.Head) -> Bool {
        assert(head.headers == stored.headers, "the entry's fields are taken from stored")
        guard stored.bodyLength <= DiskCache.inlineLimit, let body = body ?? stored.memoryBody else { return false }
        guard Clocks.monotonicNanos() >= inlineAllowedAfter.load(ordering: .relaxed), !isDegraded,
            Int64(body.count) <= limits.withLock({ $0.maxObjectBytes })
        else { return false }
        let name = DiskCache.fileName(key: stored.key, vary: head.vary)
        let fileNanos = writeEntry(
            key: stored.key, name: name, head: head, wireFields: stored.wireFields, body: body, onWriter: false)
        // Only the file calls count: indexing is CPU work, and a slow disk is what must not
        // stall a loop.
        if let fileNanos, fileNanos > slowInlineWrite.load(ordering: .relaxed) {
            inlineAllowedAfter.store(Clocks.monotonicNanos() + DiskCache.inlineBackoff, ordering: .relaxed)
            logger.notice(
                "slow disk cache write; writing on the disk thread for 30s",
                metadata: ["milliseconds": "\(fileNanos / 1_000_000)", "directory": "\(directory)"])
        }
        return true
    }

    /// Bodies up to this size are records in segment files, and may be written by
    /// ``storeInline(_:head:)``; larger ones get a file each.
    public static let inlineLimit = 64 << 10
    /// How long writes stay on the writer thread after a slow inline write.
    static let inlineBackoff: UInt64 = 30_000_000_000

    /// The size at which a segment is sealed and a new one started: 1/64 of `disk.max_bytes`
    /// (so compaction, which copies at most half a segment, stays a small share of the tier),
    /// between 256 KiB and 32 MiB (at most a few hundred segment descriptors open).
    static func segmentLimit(maxBytes: Int64) -> Int64 {
        min(32 << 20, max(256 << 10, maxBytes / 64))
    }

    /// About how many segment descriptors a tier of `maxBytes` holds open: a full tier's
    /// segments (at least half live each, or compaction takes them), plus the open ones.
    public static func segmentDescriptors(maxBytes: Int64) -> Int {
        Int(2 * maxBytes / segmentLimit(maxBytes: maxBytes)) + 8
    }

    /// Writes an entry and indexes it: a record appended to a segment up to ``inlineLimit``,
    /// else a file. Eviction runs here when `onWriter`; an event loop asks the writer for it
    /// instead. Returns the time the file calls took, or nil when the entry could not be stored.
    @discardableResult
    func writeEntry(
        key: CacheKey, name: String, head: DiskEntryFormat.Head, wireFields: ArraySlice<UInt8>?, body: [UInt8],
        onWriter: Bool
    ) -> UInt64? {
        var checksum = BodyChecksum()
        checksum.update(body)
        let entryHead = DiskEntryFormat.entryHead(
            head, wireFields: wireFields, bodyLength: Int64(body.count), bodyChecksum: checksum.value)
        let entry = DiskIndex.Entry(
            key: key, vary: head.vary, name: name, size: Int64(entryHead.count + body.count), verified: true)
        let elapsed: UInt64?
        if body.count <= DiskCache.inlineLimit {
            elapsed = appendRecord(entry, head: entryHead, body: body, onWriter: onWriter)
        } else {
            elapsed = writeFile(entry, head: entryHead, body: body)
        }
        guard let elapsed else { return nil }
        if onWriter {
            evictIfNeeded()
        } else if index.withLock({ $0.physicalBytes }) > limits.withLock({ $0.maxBytes }) {
            writer.submit { [self] in evictIfNeeded() }
        }
        return elapsed
    }

    /// Appends `entry` as a record (``appendToSegment(head:body:place:)``) and indexes it; the
    /// record it replaces, if any, is freed on the writer thread. Returns the time the file
    /// calls took, nil when the record could not be stored.
    @discardableResult
    func appendRecord(_ entry: DiskIndex.Entry, head: [UInt8], body: [UInt8], onWriter: Bool) -> UInt64? {
        let replaced: DiskIndex.Entry?
        let fileNanos: UInt64
        do throws(SystemError) {
            (replaced, fileNanos) = try appendToSegment(head: head, body: body) { index, segment, offset in
                var record = entry
                record.segment = segment
                record.offset = offset
                return index.insert(record)
            }
        } catch {
            writeFailed(error)
            return nil
        }
        writesCompleted.add(1)
        if let replaced {
            if onWriter { dispose([replaced]) } else { writer.submit { [self] in dispose([replaced]) } }
        }
        return fileNanos
    }

    /// Appends one record — `head` (preamble and head, or a whole record) then `body` — to a
    /// segment held for this call alone, and lets `place` index it, under the index lock, at
    /// the segment and offset it got, before the segment goes back to the pool (so the index's
    /// segment sizes only grow). A segment whose append failed is sealed: a disk that failed
    /// once is not trusted with it. Returns `place`'s result and the time the file calls took.
    func appendToSegment<Placed: Sendable>(
        head: [UInt8], body: [UInt8], place: (inout DiskIndex, _ segment: UInt32, _ offset: Int64) -> Placed
    ) throws(SystemError) -> (placed: Placed, fileNanos: UInt64) {
        let start = Clocks.monotonicNanos()
        var appender = try segments.take(entries: entriesDirectoryFD.load(ordering: .acquiring))
        let offset: Int64
        do {
            offset = try segments.append(&appender, head: head, body: body)
        } catch {
            let failed = appender
            index.withLock { $0.recordSegment(failed.id, size: failed.size, sealed: true) }
            throw error
        }
        let fileNanos = Clocks.monotonicNanos() - start
        let sealed = appender.size >= DiskCache.segmentLimit(maxBytes: limits.withLock { $0.maxBytes })
        let filled = appender
        let placed = index.withLock { index in
            index.recordSegment(filled.id, size: filled.size, sealed: sealed)
            return place(&index, filled.id, offset)
        }
        segments.giveBack(appender, sealed: sealed)
        return (placed, fileNanos)
    }

    /// Writes `entry` as a file (writer thread). A new name is written in place, with one
    /// `writev`: create, write, close. A crash in between leaves a file whose size does not
    /// match its preamble, which the start-up scan deletes (DISK-FORMAT.md), and no lookup reads
    /// it meanwhile because the index learns of it only once it is complete (while the start-up
    /// scan runs, lookups also find entries by file name, so until then every entry goes through
    /// `tmp/`). That saves the rename, the most expensive of the file calls on tmpfs. A name that
    /// exists (a replaced response) is written to `tmp/` and renamed over it, so that clients
    /// still sending the old file keep their bytes. Returns the time the file calls took, nil
    /// when the file could not be stored.
    func writeFile(_ entry: DiskIndex.Entry, head: [UInt8], body: [UInt8]) -> UInt64? {
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        let relative = relativePath(forName: entry.name)
        let start = Clocks.monotonicNanos()
        do throws(SystemError) {
            if isIndexComplete, let fd = try DiskCache.createNew(at: entries, relative) {
                defer { Syscall.close(fd) }
                do {
                    try FileSystem.writeAll(fd, head, body)
                } catch {
                    try? FileSystem.remove(at: entries, relative)
                    throw error
                }
            } else {
                let temporary = temporaryName(entry.name, suffix: "tmp")
                do {
                    let fd = try FileSystem.createExclusive(at: temporaryDirectoryFD, temporary)
                    defer { Syscall.close(fd) }
                    try FileSystem.writeAll(fd, head, body)
                    try FileSystem.renameCreatingDirectory(at: temporaryDirectoryFD, temporary, to: entries, relative)
                } catch {
                    try? FileSystem.remove(at: temporaryDirectoryFD, temporary)
                    throw error
                }
            }
        } catch {
            writeFailed(error)
            return nil
        }
        let elapsed = Clocks.monotonicNanos() - start
        didStore(key: entry.key, name: entry.name, vary: entry.vary, size: entry.size, evict: false)
        return elapsed
    }

    /// Creates `relative` (and its directories) for writing; nil when it exists already.
    static func createNew(at entries: Int32, _ relative: String) throws(SystemError) -> Int32? {
        do {
            return try FileSystem.createExclusiveCreatingDirectory(at: entries, relative)
        } catch  where error.errno == EEXIST {
            return nil
        }
    }

    /// Wakes the writer for jobs queued with `wakeWriter: false`.
    public func wakeWriter() { writer.wake() }

    /// A name in `tmp/` that no other write uses: the entry's name, this process and a counter
    /// (start-up empties `tmp/`, so names from a crashed run are gone).
    func temporaryName(_ name: String, suffix: String) -> String {
        let sequence = temporarySequence.add(1, ordering: .relaxed).newValue
        var temporary = ""
        temporary.reserveCapacity(name.utf8.count + suffix.utf8.count + 32)
        temporary += name
        temporary += "."
        temporary += String(DiskCache.processID)
        temporary += "."
        temporary += String(sequence)
        temporary += "."
        temporary += suffix
        return temporary
    }

    /// ``temporaryName(_:suffix:)`` as an absolute path.
    func temporaryPath(_ name: String, suffix: String) -> String {
        directory + "/tmp/" + temporaryName(name, suffix: suffix)
    }

    static let processID = getpid()

    /// Indexes an entry file once it is in place (writer thread: a finished ``DiskWrite``, or
    /// ``writeFile(_:head:body:)``), and frees the record it replaces.
    func didStore(key: CacheKey, name: String, vary: [String: String], size: Int64, evict: Bool = true) {
        let replaced = index.withLock { index in
            index.insert(DiskIndex.Entry(key: key, vary: vary, name: name, size: size, verified: true))
        }
        writesCompleted.add(1)
        if let replaced { dispose([replaced]) }
        if evict { evictIfNeeded() }
    }

    /// Records a failed write: the tier stops taking writes for a while and says so once.
    func writeFailed(_ error: SystemError) {
        writeErrors.add(1)
        let now = Clocks.monotonicNanos()
        degradedUntil.store(now + 30_000_000_000, ordering: .releasing)
        let last = lastErrorLog.load(ordering: .relaxed)
        if last == 0 || now - last > 10_000_000_000 {
            lastErrorLog.store(now, ordering: .relaxed)
            logger.error(
                "disk cache write failed; storing in memory only for 30s",
                metadata: ["error": "\(error)", "directory": "\(directory)"])
        }
    }

    public var isDegraded: Bool {
        Clocks.monotonicNanos() < degradedUntil.load(ordering: .acquiring)
    }

    // MARK: Removal

    /// Deletes what removed index entries stored (writer thread): a record is marked freed in
    /// its segment (and segments left without live records go); a file is unlinked unless its
    /// name holds a newer file by now (written and renamed over it since the removal). Clients
    /// still sending an old body keep their descriptor and bytes either way.
    func dispose(_ removed: [DiskIndex.Entry]) {
        let entries = entriesDirectoryFD.load(ordering: .acquiring)
        var freedRecords = false
        for entry in removed {
            if entry.segment != 0 {
                segments.markFreed(entry.segment, at: entry.offset)
                freedRecords = true
            } else if index.withLock({ $0.entry(named: entry.name)?.segment }) != 0 {
                try? FileSystem.remove(at: entries, relativePath(forName: entry.name))
            }
        }
        if freedRecords { reclaimEmptySegments() }
    }

    /// Drops `entry` after reading it failed with `error`, if the index still holds that very
    /// entry. An entry that is simply gone (deleted by hand, purged or evicted since it was
    /// listed or indexed) only leaves the index; anything else is corruption: counted, logged
    /// and deleted. Returns whether it was.
    @discardableResult
    func discard(_ entry: DiskIndex.Entry, after error: any Error) -> Bool {
        let removed = index.withLock { index -> DiskIndex.Entry? in
            guard let current = index.entry(named: entry.name), current.segment == entry.segment,
                current.offset == entry.offset
            else { return nil }
            return index.remove(named: entry.name)
        }
        if let error = error as? SystemError, error.errno == ENOENT { return false }
        let doomed = removed ?? entry
        if case .unknownVersion(let version)? = error as? DiskEntryFormat.Problem, version < DiskEntryFormat.version {
            // Written by an older Larder (DISK-FORMAT.md, "Versions"): not damage, just dropped.
            logger.debug("dropping a disk cache entry of an older format", metadata: ["version": "\(version)"])
            writer.submit { [self] in dispose([doomed]) }
            return true
        }
        corruptions.add(1)
        let place =
            entry.segment == 0
            ? path(forName: entry.name) : "\(directory)/v1/\(DiskSegments.relativePath(entry.segment)) at \(entry.offset)"
        logger.warning("dropping corrupt disk cache entry", metadata: ["file": "\(place)", "reason": "\(error)"])
        writer.submit { [self] in dispose([doomed]) }
        return true
    }

    /// ``discard(_:after:)`` for an entry file the index does not hold (yet): the start-up
    /// scan's and the by-name lookup's.
    @discardableResult
    func discard(_ name: String, after error: any Error) -> Bool {
        discard(DiskCache.unindexedFile(name), after: error)
    }

    /// Rewrites the head of the entry `refreshed` replaces (same key and variant) after a
    /// revalidation (RFC 9111 §4.3.4), on the writer thread: the body is copied into a new
    /// record (appended to a segment) or a new file (renamed over the old one), and the old
    /// record is freed. Nothing happens if the entry is gone.
    public func refresh(_ refreshed: StoredResponse) {
        let name = DiskCache.fileName(key: refreshed.key, vary: refreshed.varyValues)
        let path = path(forName: name)
        var headers = refreshed.headers
        headers.remove("Age")
        let head = DiskEntryFormat.Head(
            key: refreshed.key.url, status: refreshed.status, reason: refreshed.reason,
            requestTime: refreshed.requestTime, responseTime: refreshed.responseTime, vary: refreshed.varyValues,
            headers: headers)
        let temporary = temporaryPath(name, suffix: "refresh")
        writer.submit { [self] in
            guard let current = index.withLock({ $0.entry(named: name) }) else { return }
            do {
                let old = try loadHead(current)
                guard old.head.key == refreshed.key.url else { return }
                let entryHead = DiskEntryFormat.entryHead(
                    head, bodyLength: old.head.bodyLength, bodyChecksum: old.head.bodyChecksum)
                let entry = DiskIndex.Entry(
                    key: refreshed.key, vary: refreshed.varyValues, name: name,
                    size: Int64(entryHead.count) + old.head.bodyLength, verified: current.verified)
                if old.head.bodyLength <= DiskCache.inlineLimit {
                    let body = try FileSystem.read(old.file.fd, at: old.bodyOffset, count: Int(old.head.bodyLength))
                    guard body.count == Int(old.head.bodyLength) else {
                        throw DiskEntryFormat.Problem.truncated(expected: old.head.bodyLength, actual: Int64(body.count))
                    }
                    appendRecord(entry, head: entryHead, body: body, onWriter: true)
                    return
                }
                let fd = try FileSystem.createExclusive(temporary)
                defer { Syscall.close(fd) }
                try FileSystem.writeAll(fd, entryHead)
                var offset = old.bodyOffset
                let end = old.bodyOffset + old.head.bodyLength
                while offset < end {
                    let chunk = try FileSystem.read(old.file.fd, at: offset, count: Int(min(1 << 20, end - offset)))
                    if chunk.isEmpty { throw DiskEntryFormat.Problem.truncated(expected: end, actual: offset) }
                    try FileSystem.writeAll(fd, chunk)
                    offset += Int64(chunk.count)
                }
                try FileSystem.rename(temporary, path)
                let replaced = index.withLock { $0.insert(entry) }
                if let replaced { dispose([replaced]) }
            } catch {
                try? FileSystem.remove(temporary)
            }
        }
    }

    /// Removes one stored variant.
    public func remove(_ stored: StoredResponse) {
        let name = DiskCache.fileName(key: stored.key, vary: stored.varyValues)
        var removed = index.withLock { $0.remove(named: name) }.map { [$0] } ?? []
        // While the start-up scan runs, the entry may be a file it has not indexed yet.
        if removed.isEmpty && !isIndexComplete { removed = [DiskCache.unindexedFile(name)] }
        let doomed = removed
        writer.submit { [self] in dispose(doomed) }
    }

    /// Removes every stored variant of `key`. Returns whether anything was stored.
    @discardableResult
    public func purge(_ key: CacheKey) -> Bool {
        var removed = index.withLock { $0.remove(key: key) }
        let direct = DiskCache.fileName(key: key, vary: [:])
        if !isIndexComplete && !removed.contains(where: { $0.name == direct }) && access(path(forName: direct), F_OK) == 0 {
            removed.append(DiskCache.unindexedFile(direct))
        }
        let doomed = removed
        writer.submit { [self] in dispose(doomed) }
        return !removed.isEmpty
    }

    /// An index entry standing for the file `name`, which the index does not hold.
    static func unindexedFile(_ name: String) -> DiskIndex.Entry {
        DiskIndex.Entry(key: CacheKey(normalized: ""), vary: [:], name: name, size: 0, verified: false)
    }

    /// Removes everything: the entry tree is renamed away at once and deleted in the background.
    public func removeAll() {
        _ = index.withLock { $0.removeAll() }
        let trash = "\(directory)/trash-\(getpid())-\(trashCounter.add(1, ordering: .relaxed).newValue)"
        writer.submit { [self] in
            do {
                try FileSystem.rename(directory + "/v1", trash)
                try FileSystem.makeDirectories(directory + "/v1")
                let fresh = try FileSystem.openDirectory(directory + "/v1")
                defer { Syscall.close(fresh) }
                try FileSystem.replaceDescriptor(entriesDirectoryFD.load(ordering: .acquiring), with: fresh)
                // A store that took an appender before this keeps writing to a segment that is
                // now in the trash; its entry then reads as gone.
                segments.reset()
            } catch {
                logger.error("cannot clear the disk cache", metadata: ["error": "\(error)"])
                return
            }
            FileSystem.removeTree(trash)
        }
    }

}
